"""Example submission for mla_decode: out (B, H, 512) bf16, absorbed multi-head latent attention
for one query token per sequence over a ragged latent cache.

One sequence at a time: its L cached latents (no mask needed), the scores of all H heads in fp32
from fp32 copies, a softmax, and the weighted sum of the latent values in fp32. Honest and slow:
B small matmuls with fp32 copies of the cache, where FlashMLA reads each latent once in bf16, keeps
the scores in registers and feeds both products to the tensor cores.
"""

from __future__ import annotations

import math

import torch

LATENT = 512
SCALE = 1 / math.sqrt(128 + 64)


def kernel(q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor) -> None:
    for row, length in enumerate(seq_lens.tolist()):
        cache = kv[row, :length].float()  # (L, 576)
        probs = torch.softmax(q[row].float() @ cache.t() * SCALE, dim=-1)  # (H, L)
        out[row] = probs @ cache[:, :LATENT]
