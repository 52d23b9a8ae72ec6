"""Exact work of cross_entropy, in fp32 SIMT flops.

Per logit: the running maximum, the subtraction of the maximum, the exponential and its addition
into the row's sum (4; a special function counts as 1). Per token: the log of the sum and the
subtraction of the target's logit (2; adding the maximum back is folded into that subtraction when
the target's logit is taken relative to it). 4TV + 2T, as vocab_parallel_logprob on one GPU.
Bytes: the logits read once (bf16), the targets read (int64) and the losses written (fp32) once.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP32_BYTES, INT64_BYTES = 2, 4, 8


def counts(axes: dict[str, int]) -> Counts:
    t, v = axes["T"], axes["V"]
    return Counts(
        flops={"fp32_simt": float(4 * t * v + 2 * t)},
        bytes=float(BF16_BYTES * t * v + t * (INT64_BYTES + FP32_BYTES)),
    )
