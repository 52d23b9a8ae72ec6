"""Exact work of moe_unpermute.

flops: per output element K multiplies and K - 1 adds (w_j * x_j summed over the token's K slots):
(2K - 1) TH fp32 SIMT operations (with bf16 operands the work could go to tensor cores as T
batched 1 x K by K x H products, but at K <= 8 it is memory-bound either way).
bytes: the T*K expert rows (bf16) read once, the destination rows (int32) and the weights (fp32)
read once, the output (T, H) bf16 written once.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP32_BYTES, INT32_BYTES = 2, 4, 4


def counts(axes: dict[str, int]) -> Counts:
    t, h, k = axes["T"], axes["H"], axes["K"]
    return Counts(
        flops={"fp32_simt": float((2 * k - 1) * t * h)},
        bytes=float((t * k * h + t * h) * BF16_BYTES + t * k * (INT32_BYTES + FP32_BYTES)),
    )
