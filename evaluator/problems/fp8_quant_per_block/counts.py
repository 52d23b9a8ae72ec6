"""Exact work of fp8_quant_per_block, in fp32 SIMT flops: fp8_quant_per_token's with a group of 128
values of a row in place of the whole row.

Per element: the running maximum of |x| (1) and the division by the group's scale (1). Per group
(T H / 128 of them): max(amax, eps) and / 448 (2). 2TH + 2TH/128. Bytes: x read once (bf16), q
written once (1 byte), the scales written once (fp32): 3TH + 4TH/128.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP8_BYTES, FP32_BYTES = 2, 1, 4
GROUP = 128


def counts(axes: dict[str, int]) -> Counts:
    t, h = axes["T"], axes["H"]
    groups = t * (h // GROUP)
    return Counts(
        flops={"fp32_simt": float(2 * t * h + 2 * groups)},
        bytes=float((BF16_BYTES + FP8_BYTES) * t * h + FP32_BYTES * groups),
    )
