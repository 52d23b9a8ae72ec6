"""Example submission for top_k_sampling: token (B,) int32, one per row of logits (B, V) fp32, from
the top_k[row] most probable tokens by the given uniform u; K is the largest top_k allowed.

vLLM's formulation (apply_top_k_only): the top_k[row]-th largest logit from torch.topk(logits, K)
as a threshold, every logit below it masked to -inf over the whole vocabulary, a softmax over the
whole vocabulary, then the inverse CDF in vocabulary order (cumsum, searchsorted). Honest and
slower than the baseline, which works on the K kept logits alone: the mask, the softmax and the
cumulative sum each read and write all V entries of every row, where only K of them carry weight.
"""

from __future__ import annotations

import torch


def kernel(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor, K: int) -> None:
    threshold = logits.topk(K, dim=-1).values.gather(1, (top_k.long() - 1)[:, None])
    masked = logits.masked_fill(logits < threshold, float("-inf"))  # out of place: the inputs stay as given
    cdf = torch.softmax(masked, dim=-1).cumsum(dim=-1)
    picked = torch.searchsorted(cdf, u[:, None], right=True).squeeze(1)
    token.copy_(picked.clamp(max=logits.shape[-1] - 1))
