"""Exact work of fp8_quant_per_token, in fp32 SIMT flops.

Per element: the running maximum of |x| (1: the absolute value is a sign-bit mask, not counted) and
the division by the scale (1, or a multiplication by its reciprocal); the rounding to e4m3 is a
conversion, not counted. Per token: max(amax, eps) and / 448 (2). 2TH + 2T. Bytes: x read once
(bf16), q written once (1 byte) and the scales written once (fp32): 3TH + 4T.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP8_BYTES, FP32_BYTES = 2, 1, 4


def counts(axes: dict[str, int]) -> Counts:
    t, h = axes["T"], axes["H"]
    return Counts(
        flops={"fp32_simt": float(2 * t * h + 2 * t)},
        bytes=float((BF16_BYTES + FP8_BYTES) * t * h + FP32_BYTES * t),
    )
