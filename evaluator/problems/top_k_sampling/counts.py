"""Exact work of top_k_sampling.

flops: none counted. Finding the k-th largest logit is selection (comparisons, not counted, as in
moe_router_topk and sort_keys), and the candidates' exponentials and their sum (3 fp32 operations
per candidate) depend on the inputs' top_k, not on the shape: at most 3BK, under 0.01% of t_SOL's
memory term at every ranked shape (3K / 67 TFLOP/s against 4V / 4.8 TB/s per row: K = 100,
V = 129280 gives 4e-5). t_SOL is the memory term.
bytes: the logits (B, V) fp32 read once, top_k (B,) int32 and u (B,) fp32 read, the tokens (B,)
int32 written.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES, INT32_BYTES = 4, 4


def counts(axes: dict[str, int]) -> Counts:
    b, v = axes["B"], axes["V"]
    return Counts(flops={}, bytes=float(FP32_BYTES * (b * v + b) + 2 * INT32_BYTES * b))
