"""Exact work of softmax, in fp32 SIMT flops.

Per element: the max comparison, the subtraction, the exponential (a special function counts as
1), the accumulation into the sum and the final scaling (5). The one reciprocal per row is
negligible and not counted. Bytes: x read once, y written once (bf16).
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    r, c = axes["R"], axes["C"]
    return Counts(flops={"fp32_simt": float(5 * r * c)}, bytes=float(2 * r * c * BF16_BYTES))
