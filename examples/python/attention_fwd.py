"""Example submission for attention_fwd: plain torch, one head at a time, in fp32.

kernel(q, k, v, O, LSE, causal=0|1): q, k, v (B,H,S,D) bf16; O (B,H,S,D) bf16 and LSE (B,H,S)
fp32 are written in place. Materialises each head's S x S scores (1 GiB at S = 16k): correct,
slow, and a starting point, not a FlashAttention.
"""

from __future__ import annotations

import math

import torch


def kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    seq, dim = q.shape[2], q.shape[3]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = q[b, h].float() @ k[b, h].float().t() / math.sqrt(dim)
            if mask is not None:
                scores.masked_fill_(mask, float("-inf"))
            lse = torch.logsumexp(scores, dim=-1)
            LSE[b, h] = lse
            O[b, h] = torch.exp(scores - lse[:, None]) @ v[b, h].float()
