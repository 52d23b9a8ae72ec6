"""mla_decode inputs, reference (fp64, one sequence at a time) and baseline (batched matmuls).

DeepSeek-V2/V3's multi-head latent attention at decode, in the absorbed form FlashMLA computes:
every head's query is q[b, h] (576 = 512 latent dims, W_UK absorbed, + 64 RoPE dims); all heads
share one key per cached token, its latent kv[b, i] (576), whose first 512 values are also the
value. out[b, h] = softmax(q[b, h] . kv[b, :L]^T * scale) @ kv[b, :L, :512], L = seq_lens[b],
scale = 1/sqrt(192) (the model's qk head dim, 128 + 64, which absorption keeps).
"""

from __future__ import annotations

import math

import torch

from evaluator.problems import _attention
from evaluator.problems._sampling import draw
from evaluator.problems.mla_decode.counts import LATENT, QK_DIM
from evaluator.problems.paged_decode_attention.reference import GARBAGE_GAIN, sequence_lengths

DISTRIBUTIONS = _attention.DISTRIBUTIONS
SCALE = 1 / math.sqrt(128 + 64)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """q and kv ~ the distribution (peaked: q x 4); ragged lengths summing to T (paged_decode_attention's,
    from the seed alone); cache slots past a sequence's length 16x larger (reading them is far off)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"mla_decode has no distribution {distribution!r}")
    b, h, s = axes["B"], axes["H"], axes["S"]
    sampler = "normal" if distribution == "peaked" else distribution
    q = draw("q", (b, h, QK_DIM), axes, seed, device, distribution, sampler)
    if distribution == "peaked":
        q.mul_(_attention.PEAKED_GAIN)
    lengths = torch.tensor(sequence_lengths(axes, seed), dtype=torch.int32)
    kv = draw("kv", (b, s, QK_DIM), axes, seed, device, distribution, sampler)
    unused = torch.arange(s)[None, :] >= lengths[:, None]  # (B, S)
    kv.mul_(torch.where(unused, GARBAGE_GAIN, 1.0).to(device)[:, :, None])
    return {"q": q.to(torch.bfloat16), "kv": kv.to(torch.bfloat16), "seq_lens": lengths.to(device)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    q = inputs["q"].double()
    out = torch.empty((*q.shape[:2], LATENT), dtype=torch.float64, device=q.device)
    for row, length in enumerate(inputs["seq_lens"].tolist()):
        kv = inputs["kv"][row, :length].double()  # (L, 576)
        probs = torch.softmax(q[row] @ kv.t() * SCALE, dim=-1)  # (H, L)
        out[row] = probs @ kv[:, :LATENT]
    return {"out": out}


def baseline(q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor) -> None:
    """Batched matmuls over the whole cache, the fastest eager form that keeps the scores in fp32:
    on CUDA the scores from one bf16 batched GEMM with fp32 output (`out_dtype`), on the CPU (no
    such op) from fp32 copies of q and kv, version 1's way on both; the products are exact in fp32
    either way (torch has no fused MLA decode; bf16 scores, as Hugging Face's DeepSeek code and SDPA's
    math path compute them, fail the tolerance), the slots past each
    length masked, the softmax in fp32, probabilities rounded to bf16 (as FlashAttention does), then
    one batched matmul with the latent values into out. Reads all S slots of every sequence."""
    if not q.is_cuda:
        fp32_copies_baseline(q, kv, seq_lens, out)
        return
    # One bf16 GEMM with fp32 accumulation and output (torch >= 2.8, CUDA only).
    _attend(torch.bmm(q, kv.transpose(1, 2), out_dtype=torch.float32), q, kv, seq_lens, out)  # (B, H, S)


def fp32_copies_baseline(
    q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """Version 1's baseline: the scores from fp32 copies of q and kv on every device."""
    _attend(torch.bmm(q.float(), kv.float().transpose(1, 2)), q, kv, seq_lens, out)


def _attend(
    scores: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """The rest of both versions: scale, mask, fp32 softmax, bf16 probabilities @ the latent values."""
    scores.mul_(SCALE)
    unused = torch.arange(kv.shape[1], device=kv.device)[None, :] >= seq_lens[:, None]
    scores.masked_fill_(unused[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    torch.bmm(probs, kv[:, :, :LATENT], out=out)
