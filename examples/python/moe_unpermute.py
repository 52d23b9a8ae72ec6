"""Example submission for moe_unpermute: out (T,H) bf16, each token's K expert rows (found through
dest_rows) weighted by topk_weights and summed in fp32.

One slot at a time: for each of the K slots, gather that slot's row of every token, scale it by its
weight and add it to an fp32 accumulator; round once at the end. Honest and slower than it could
be: K gathers and K read-modify-writes of a (T, H) fp32 buffer, where one kernel would read each
expert row once and keep the sum in registers.
"""

from __future__ import annotations

import torch


def kernel(
    expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_weights: torch.Tensor, out: torch.Tensor
) -> None:
    total = torch.zeros(out.shape, dtype=torch.float32, device=out.device)
    for slot in range(dest_rows.shape[1]):
        rows = expert_out.index_select(0, dest_rows[:, slot]).float()
        total.addcmul_(rows, topk_weights[:, slot, None])
    out.copy_(total)
