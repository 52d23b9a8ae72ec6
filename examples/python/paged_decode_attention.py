"""Example submission for paged_decode_attention: q (B,Hq,128) bf16, k_cache and v_cache
(NB,16,Hkv,128) bf16, block_table (B,S/16) int32, seq_lens (B,) int32 -> out (B,Hq,128) bf16.

Padded batch attention in fp32: every page the block table names is gathered (S slots per
sequence, whatever its length), the query heads are grouped by their KV head (head h reads KV
head h // (Hq/Hkv)), slots at or past seq_lens[b] are masked to -inf before the softmax, and the
weighted sum of V is rounded to bf16 once. Honest and slower than a paged kernel: the padded K and
V are copied, then widened to fp32, so short sequences cost as much as the longest.
"""

from __future__ import annotations

import math

import torch


def kernel(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
) -> None:
    b, hq, d = q.shape
    page, hkv = k_cache.shape[1], k_cache.shape[2]
    s = block_table.shape[1] * page
    pages = block_table.long()
    k = k_cache[pages].view(b, s, hkv, d).float()
    v = v_cache[pages].view(b, s, hkv, d).float()
    grouped = q.float().view(b, hkv, hq // hkv, d)
    scores = torch.einsum("bhgd,bshd->bhgs", grouped, k) / math.sqrt(d)
    past_end = torch.arange(s, device=q.device)[None, :] >= seq_lens[:, None]  # (B, S)
    scores.masked_fill_(past_end[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out.copy_(torch.einsum("bhgs,bshd->bhgd", probs, v).reshape(b, hq, d))
