"""Exact work of layernorm, in fp32 SIMT flops.

Per element: the accumulation into the row sum, the subtraction of the mean (once, kept for both
uses), the square, the accumulation into the sum of squares, the multiply by 1/std, the multiply
by the weight and the add of the bias (7). Per row: the two divisions by H (mean and variance),
the + eps and the reciprocal square root (4; a special function counts as 1). A one-pass
(Welford) kernel does more; the two-pass count is the minimum. Bytes: x, weight and bias read
once, y written once.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    t, h = axes["T"], axes["H"]
    return Counts(
        flops={"fp32_simt": float(7 * t * h + 4 * t)},
        bytes=float((2 * t * h + 2 * h) * BF16_BYTES),
    )
