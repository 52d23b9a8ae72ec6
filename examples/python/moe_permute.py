"""Example submission for moe_permute: hidden (T,H) bf16 and topk_ids (T,K) int32 -> permuted
(T*K,H) bf16 in expert order, expert_offsets (E+1,) int32 and dest_rows (T,K) int32.

One sort on a key no two (token, slot) pairs share, expert * T*K + flat index, gives the required
order (by expert, then token, then slot) whatever the sort's stability; searchsorted on the sorted
experts gives every expert's first row; one gather copies the rows. Honest and slower than a
fused kernel: the int64 keys, and the rows gathered through an index rather than written from
each token as it is read.
"""

from __future__ import annotations

import torch


def kernel(
    hidden: torch.Tensor,
    topk_ids: torch.Tensor,
    permuted: torch.Tensor,
    expert_offsets: torch.Tensor,
    dest_rows: torch.Tensor,
) -> None:
    t, k = topk_ids.shape
    pairs = torch.arange(t * k, device=hidden.device)
    keys = topk_ids.view(-1).long() * (t * k) + pairs
    sorted_keys, order = torch.sort(keys)
    experts = torch.arange(expert_offsets.numel(), device=hidden.device)
    expert_offsets.copy_(torch.searchsorted(sorted_keys // (t * k), experts))
    permuted.copy_(hidden[order // k])
    dest_rows.view(-1)[order] = pairs.to(torch.int32)
