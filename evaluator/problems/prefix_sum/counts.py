"""Exact work of prefix_sum, in fp32 SIMT flops.

Per row of N: y[0] = x[0] is a copy, every later element one add (N - 1). A work-efficient parallel
scan does about twice that, a Hillis-Steele scan N log N; the count is the least any scan needs.
Bytes: x read once, y written once (fp32); tile totals and carries are a few KB and not counted.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    r, n = axes["R"], axes["N"]
    return Counts(flops={"fp32_simt": float(r * (n - 1))}, bytes=float(2 * r * n * FP32_BYTES))
