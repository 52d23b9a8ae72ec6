"""Exact work of vector_add: one fp32 add per element; read a and b, write c."""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    n = axes["N"]
    return Counts(flops={"fp32_simt": float(n)}, bytes=float(3 * n * FP32_BYTES))
