"""Example submission for moe_router_topk: logits (T,E) fp32 -> topk_weights (T,K) fp32 and
topk_ids (T,K) int32, the experts in descending order of weight.

The Hugging Face way (Qwen3-MoE with norm_topk_prob): the softmax over all E experts in fp32, the
K largest probabilities (ties cannot occur: the inputs keep logits 1e-3 apart), then the weights
divided by their sum. Honest and slower than it could be: the (T,E) probabilities go through
memory, where a fused kernel would read each logit once and keep K candidates in registers.
"""

from __future__ import annotations

import torch


def kernel(logits: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> None:
    probabilities = torch.softmax(logits, dim=-1)
    weights, ids = torch.topk(probabilities, topk_ids.shape[1], dim=-1, sorted=True)
    topk_weights.copy_(weights / weights.sum(dim=-1, keepdim=True))
    topk_ids.copy_(ids)
