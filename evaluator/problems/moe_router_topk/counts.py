"""Exact work of moe_router_topk, in fp32 SIMT flops.

The renormalised weights are the softmax of the K selected logits alone (the full softmax's
denominator cancels), so the least work per token is: K subtractions of the largest logit, K
exponentials (a special function counts as 1), K - 1 additions and K divisions: 4K - 1. Finding
the K largest of E logits takes comparisons, which are not flops and are not counted (as prefix_sum
and moe_permute count no integer work). Bytes: the logits read once, weights (fp32) and ids
(int32) written once. Memory-bound: t_SOL is the time to stream the logits.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES = INT32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    t, e, k = axes["T"], axes["E"], axes["K"]
    return Counts(
        flops={"fp32_simt": float(t * (4 * k - 1))},
        bytes=float(t * e * FP32_BYTES + t * k * (FP32_BYTES + INT32_BYTES)),
    )
