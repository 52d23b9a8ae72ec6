"""Exact work of top_p_sampling.

flops: a softmax's normaliser needs, per logit, a subtraction of the row's maximum, an exp and an
add into the sum: 3BV fp32 SIMT operations (the maximum's and the nucleus threshold's comparisons
and the prefix of the nucleus are selection work, not counted, as in moe_router_topk).
bytes: the logits (B, V) fp32 read once, top_p and u (B,) fp32 read, the tokens (B,) int32 written.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP32_BYTES, INT32_BYTES = 4, 4


def counts(axes: dict[str, int]) -> Counts:
    b, v = axes["B"], axes["V"]
    return Counts(flops={"fp32_simt": float(3 * b * v)}, bytes=float(FP32_BYTES * (b * v + 2 * b) + INT32_BYTES * b))
