"""Example submission for top_p_sampling: token (B,) int32, one per row of logits (B, V) fp32,
from the top-p nucleus by the given uniform u.

Without a sort: the nucleus threshold tau is found by bisection on the probability itself (the
mass of {p >= tau} falls as tau rises), 40 halvings of [0, max p] per row, each a masked sum over
the row; then the pick is a cumulative sum of the nucleus in vocabulary order. Honest and slow:
40 passes over the probabilities, where FlashInfer's kernel needs a few, reading the logits once.
The bisection stops between two distinct probabilities, so its tau selects the same tokens as the
sorted definition.
"""

from __future__ import annotations

import torch

HALVINGS = 40


def kernel(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor, token: torch.Tensor) -> None:
    probs = torch.softmax(logits, dim=-1)
    low = torch.zeros_like(top_p)  # mass of {p >= low} >= top_p always
    high = probs.max(dim=-1).values * (1 + 1e-6)  # mass of {p >= high} = 0 < top_p
    for _ in range(HALVINGS):
        middle = (low + high) / 2
        mass = torch.where(probs >= middle[:, None], probs, 0).sum(dim=-1)
        enough = mass >= top_p
        low = torch.where(enough, middle, low)
        high = torch.where(enough, high, middle)
    nucleus = torch.where(probs >= low[:, None], probs, 0)
    cdf = nucleus.cumsum(dim=-1)
    picked = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
    token.copy_(picked.clamp(max=logits.shape[-1] - 1))
