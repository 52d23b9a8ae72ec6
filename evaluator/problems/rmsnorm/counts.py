"""Exact work of rmsnorm, in fp32 SIMT flops.

Per element: the residual add, the square, the accumulation, the multiply by 1/rms and the
multiply by the weight (5). Per row: the division by H, the + eps and the reciprocal square root
(3; a special function counts as 1). Bytes: x, residual and weight read once, y and residual_out
written once.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    t, h = axes["T"], axes["H"]
    return Counts(
        flops={"fp32_simt": float(5 * t * h + 3 * t)},
        bytes=float((4 * t * h + h) * BF16_BYTES),
    )
