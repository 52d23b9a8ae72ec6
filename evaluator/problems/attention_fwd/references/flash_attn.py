"""Reference line: FlashAttention-2's forward (flash_attn_func), with the log-sum-exp it returns.

FlashAttention takes (batch, tokens, heads, head_dim): q, k and v are passed as transposed views of
the problem's (B, H, S, D) tensors (its kernels take any strides with a contiguous head_dim), and
its output is copied back into O, its log-sum-exp into LSE. The problem's baseline is cuDNN's
attention, faster than FlashAttention-2 on Hopper: this line shows by how much.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from flash_attn import flash_attn_func

REFERENCE = {
    "label": "flash_attn", "title": "FlashAttention-2 flash_attn_func (output copied into O)", "package": "flash-attn",
    "module": "flash_attn", "url": "https://github.com/Dao-AILab/flash-attention", "needs_gpu": True,
}
print("solboard-reference: flash-attn", version("flash-attn"), flush=True)


def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor, LSE: torch.Tensor, *,
           causal: int) -> None:
    out, lse, _ = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=bool(causal),
                                  return_attn_probs=True)
    O.copy_(out.transpose(1, 2))
    LSE.copy_(lse)
