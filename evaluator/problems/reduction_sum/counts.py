"""Exact work of reduction_sum: N - 1 fp32 additions per row (the first element starts the sum),
x (R, N) read once and y (R,) written once, 4 bytes each.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    r, n = axes["R"], axes["N"]
    return Counts(flops={"fp32_simt": float(r * (n - 1))}, bytes=float(FP32_BYTES * (r * n + r)))
