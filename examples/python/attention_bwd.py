"""Example submission for attention_bwd: plain torch, one head at a time, in fp32.

kernel(q, k, v, o, dO, lse, dq, dk, dv, causal=0|1). Recomputes P = exp(q k^T / sqrt(D) - lse)
from the forward's lse, then dV = P^T dO, dS = P * (dO V^T - rowsum(dO * o)),
dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D). Materialises each head's S x S matrices.
"""

from __future__ import annotations

import math

import torch


def kernel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    dO: torch.Tensor,
    lse: torch.Tensor,
    dq: torch.Tensor,
    dk: torch.Tensor,
    dv: torch.Tensor,
    *,
    causal: int,
) -> None:
    seq, dim = q.shape[2], q.shape[3]
    scale = 1 / math.sqrt(dim)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            qh, kh, vh, d_out = q[b, h].float(), k[b, h].float(), v[b, h].float(), dO[b, h].float()
            scores = qh @ kh.t() * scale
            if mask is not None:
                scores.masked_fill_(mask, float("-inf"))
            probs = torch.exp(scores - lse[b, h, :, None])
            delta = (d_out * o[b, h].float()).sum(dim=-1, keepdim=True)
            d_scores = probs * (d_out @ vh.t() - delta)
            dv[b, h] = probs.t() @ d_out
            dq[b, h] = d_scores @ kh * scale
            dk[b, h] = d_scores.t() @ qh * scale
