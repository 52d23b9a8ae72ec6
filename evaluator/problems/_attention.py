"""Attention maths shared by attention_fwd and attention_bwd (imports torch).

Scores are s_ij = (q_i . k_j) / sqrt(D); with ``causal`` a query i sees keys j <= i (top-left
aligned, as F.scaled_dot_product_attention(is_causal=True) for equal lengths). LSE_i is the
natural-log log-sum-exp of query i's scaled, unmasked scores (FlashAttention's softmax_lse).

The references work in fp64 (immune to TF32 settings; on Hopper, fp64 runs on the tensor cores
at the rate of fp32 SIMT) and go through the queries in chunks so that a 16k sequence never
materialises more than ``CHUNK_ELEMENTS`` scores at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

#: At most this many fp64 scores (1 GiB) per chunk of query rows.
CHUNK_ELEMENTS = 2**27
#: `peaked`: queries scaled up so that scores have standard deviation 4 (sharp attention).
PEAKED_GAIN = 4.0
DISTRIBUTIONS = (*BASIC_DISTRIBUTIONS, "peaked")

_Result = TypeVar("_Result")
#: (device, shape, causal) where cuDNN's attention refused once: not tried again there. A refusal is
#: cuDNN's check of the inputs before any launch, so nothing ran; keyed by shape because cuDNN may take
#: one sequence length and refuse another (an unranked odd length must not move the ranked shapes of
#: the same job onto the fallback).
_CUDNN_REFUSED: set[tuple[int | None, tuple[int, ...], bool]] = set()


def cudnn_or_none(q: torch.Tensor, causal: bool, call: Callable[[], _Result]) -> _Result | None:
    """``call()`` (one of SDPA's cuDNN attention ops on ``q``'s inputs), or None where cuDNN refuses
    them (no cuDNN attention on this GPU or build, or not for this shape): the baselines then take
    the SDPA flash backend. Running out of memory is no refusal (torch raises it as a RuntimeError):
    it propagates, so that a passing shortage never leaves a shape on the slower fallback for good."""
    key = (q.device.index, tuple(q.shape), causal)
    if key in _CUDNN_REFUSED:
        return None
    try:
        return call()
    except torch.OutOfMemoryError:
        raise
    except RuntimeError:
        _CUDNN_REFUSED.add(key)
        return None


def draw_qkv(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str, names: tuple[str, ...]
) -> dict[str, torch.Tensor]:
    """bf16 (B, H, S, D) tensors of the given names; unit-variance entries give scores ~ N(0, 1)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"attention has no distribution {distribution!r}")
    sampler = "normal" if distribution == "peaked" else distribution
    shape = (axes["B"], axes["H"], axes["S"], axes["D"])
    tensors = {name: draw(name, shape, axes, seed, device, distribution, sampler) for name in names}
    if distribution == "peaked":
        tensors["q"].mul_(PEAKED_GAIN)
    return {name: tensor.to(torch.bfloat16) for name, tensor in tensors.items()}


def _chunks(axes: dict[str, int]) -> Iterator[slice]:
    rows = max(1, CHUNK_ELEMENTS // (axes["B"] * axes["H"] * axes["S"]))
    for start in range(0, axes["S"], rows):
        yield slice(start, min(start + rows, axes["S"]))


def _scores(q: torch.Tensor, k: torch.Tensor, rows: slice, causal: bool) -> torch.Tensor:
    scores = q[:, :, rows] @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(rows.start, rows.stop, device=q.device)[:, None]
        j = torch.arange(k.shape[2], device=q.device)[None, :]
        scores.masked_fill_(j > i, float("-inf"))
    return scores


def forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, axes: dict[str, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp64 (O, LSE) from bf16 q, k, v."""
    q, k, v = q.double(), k.double(), v.double()
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=torch.float64, device=q.device)
    for rows in _chunks(axes):
        scores = _scores(q, k, rows, bool(axes["causal"]))
        row_max = scores.amax(dim=-1, keepdim=True)
        probs = torch.exp(scores - row_max)
        total = probs.sum(dim=-1, keepdim=True)
        out[:, :, rows] = (probs @ v) / total
        lse[:, :, rows] = (row_max + torch.log(total)).squeeze(-1)
    return out, lse


def backward(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64 (dq, dk, dv) from the given q, k, v, o, dO and lse, as a FlashAttention backward uses
    them: P = exp(s - lse), dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
    dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D)."""
    q, k, v = (inputs[name].double() for name in ("q", "k", "v"))
    d_out, lse = inputs["dO"].double(), inputs["lse"].double()
    delta = (d_out * inputs["o"].double()).sum(dim=-1)
    dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
    scale = 1 / math.sqrt(q.shape[-1])
    for rows in _chunks(axes):
        probs = torch.exp(_scores(q, k, rows, bool(axes["causal"])) - lse[:, :, rows, None])
        dv += probs.transpose(-1, -2) @ d_out[:, :, rows]
        d_scores = probs * (d_out[:, :, rows] @ v.transpose(-1, -2) - delta[:, :, rows, None])
        dq[:, :, rows] = d_scores @ k * scale
        dk += d_scores.transpose(-1, -2) @ q[:, :, rows] * scale
    return {"dq": dq, "dk": dk, "dv": dv}
