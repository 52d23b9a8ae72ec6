"""Example submission for mla_decode: out (B, H, 512) bf16, absorbed multi-head latent attention
for one query token per sequence over a ragged latent cache.

The whole batch at once, in fp32: every sequence's S cache slots, the slots past its length masked
to -inf before the softmax, then the weighted sum of the latent values. Honest and slow: it reads
and converts the whole cache (slots past a sequence's length included), and writes the (B, H, S)
scores and probabilities to memory, where FlashMLA reads each used latent once in bf16, keeps the
scores in registers and feeds both products to the tensor cores. A handful of launches, not one
loop per sequence (which costs the Nsight Compute witness ~11 ms for every kernel).
"""

from __future__ import annotations

import math

import torch

LATENT = 512
SCALE = 1 / math.sqrt(128 + 64)


def kernel(q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor) -> None:
    cache = kv.float()  # (B, S, 576)
    scores = torch.bmm(q.float(), cache.transpose(1, 2)).mul_(SCALE)  # (B, H, S)
    past = torch.arange(kv.shape[1], device=kv.device)[None, :] >= seq_lens[:, None]  # (B, S)
    scores.masked_fill_(past[:, None, :], float("-inf"))  # every sequence has at least one slot
    out.copy_(torch.bmm(torch.softmax(scores, dim=-1), cache[:, :, :LATENT]))
