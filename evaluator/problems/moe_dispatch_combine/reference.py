"""moe_dispatch_combine inputs (tokens, routing, expert weights), reference (fp64) and baseline
(all_to_all_single dispatch, grouped GEMM, all_to_all_single combine, weighted sum in fp32)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from evaluator.problems._multi import block, world_size
from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator
from evaluator.problems.grouped_gemm_bf16.reference import baseline as grouped_gemm

if TYPE_CHECKING:
    from evaluator.harness.multi.rank_context import RankContext

#: ``skewed``: expert popularity is log-normal with this sigma. At E = 128-256 the busiest expert
#: then receives ~6-12x the mean load and, at W = 8, the busiest rank ~1.2-1.5x the mean.
SKEW_SIGMA = 1.0
#: The tensors every rank holds a block of, and the dimension the blocks are taken along.
SHARDED = {"x": 0, "topk_ids": 0, "topk_weights": 0, "W": 0}


def routing(axes: dict[str, int], seed: int, device: str | torch.device,
            distribution: str) -> tuple[torch.Tensor, torch.Tensor]:
    """topk_ids (T, K) int64 and topk_weights (T, K) fp32 of all T tokens, as a router makes them.

    Scores: log popularity + Gumbel noise per (token, expert), so the K highest scores of a token are
    K distinct experts drawn without replacement in proportion to their popularity (equal for the
    basic distributions: a balanced router; log-normal under ``skewed``). The gate weights are the
    softmax of the chosen scores (they sum to 1, as Qwen3's normalised top-k). Two guarantees the
    counts rely on (counts.py), each changing a small fraction of the draws:

    - every token has at least one expert on another rank than its own (a token whose K experts all
      lie on its rank swaps its lowest-scoring one for its best-scoring expert elsewhere);
    - every expert is chosen by some token (an unchosen expert takes the lowest-scoring slot among
      the tokens of other ranks whose expert is chosen at least twice; such a slot exists when
      T K >= 2 E).
    """
    t, e, k, w = axes["T"], axes["E"], axes["K"], world_size(axes)
    if k > e or t * k < 2 * e:
        raise ValueError(f"moe_dispatch_combine needs K <= E and T K >= 2 E, got T={t} E={e} K={k}")
    gen = generator(device, seed, distribution, axes, "routing")
    popularity = torch.zeros(e, device=device)
    if distribution == "skewed":
        popularity = torch.randn(e, generator=gen, device=device).mul_(SKEW_SIGMA)
    uniform = torch.rand((t, e), generator=gen, device=device).clamp_(min=torch.finfo(torch.float32).tiny)
    scores = popularity - uniform.log_().neg_().log_()  # Gumbel(0, 1) noise, bounded: u >= tiny
    ids = scores.topk(k, dim=1).indices  # descending: the last slot is the least confident choice
    token_rank = torch.arange(t, device=device) // (t // w)
    expert_rank = torch.arange(e, device=device) // (e // w)
    own = expert_rank.unsqueeze(0) == token_rank.unsqueeze(1)  # (T, E): experts on the token's rank
    all_local = own.gather(1, ids).all(dim=1)
    ids[all_local, k - 1] = scores.masked_fill(own, -math.inf).argmax(dim=1)[all_local]
    chosen = torch.bincount(ids.view(-1), minlength=e)
    for expert in (chosen == 0).nonzero().view(-1).tolist():
        slot_scores = scores.gather(1, ids)
        movable = (token_rank != expert_rank[expert]).unsqueeze(1) & (chosen[ids] >= 2)
        slot = int(slot_scores.masked_fill(~movable, math.inf).view(-1).argmin())
        token, place = divmod(slot, k)
        chosen[ids[token, place]] -= 1
        chosen[expert] += 1
        ids[token, place] = expert
    return ids, torch.softmax(scores.gather(1, ids), dim=1)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """The global data: x (T, H) bf16 tokens, their routing (``routing``) and every expert's weight
    W (E, N, H) bf16. x ~ D and W ~ D / sqrt(H) for D in {normal, uniform, outliers}, so every
    expert's output is O(1); ``skewed``: normal values, skewed expert popularity."""
    t, h, n, e = axes["T"], axes["H"], axes["N"], axes["E"]
    sampler = "normal" if distribution == "skewed" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"moe_dispatch_combine has no distribution {distribution!r}")
    x = draw("x", (t, h), axes, seed, device, distribution, sampler).to(torch.bfloat16)
    weights = (
        draw("W", (e, n, h), axes, seed, device, distribution, sampler).div_(math.sqrt(h)).to(torch.bfloat16)
    )
    ids, gates = routing(axes, seed, device, distribution)
    return {"x": x, "topk_ids": ids, "topk_weights": gates, "W": weights}


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    """Rank r holds its T/W tokens (block r) with their routing, and its experts (block r of E)."""
    w = world_size(axes)
    return {name: block(global_inputs[name], dim, rank, w) for name, dim in SHARDED.items()}


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """y[t] = sum_j topk_weights[t, j] x[t] W[topk_ids[t, j]]^T in fp64, one expert at a time."""
    x, ids, gates = global_inputs["x"].double(), global_inputs["topk_ids"], global_inputs["topk_weights"]
    k = ids.shape[1]
    pairs = torch.argsort(ids.view(-1), stable=True)  # (token, slot) pairs grouped by expert
    bounds = torch.bincount(ids.view(-1), minlength=axes["E"]).cumsum(0).tolist()
    y = torch.zeros((axes["T"], axes["N"]), dtype=torch.float64, device=x.device)
    start = 0
    for expert, end in enumerate(bounds):
        tokens, slots = pairs[start:end] // k, pairs[start:end] % k
        expert_out = x[tokens] @ global_inputs["W"][expert].double().t()
        y.index_add_(0, tokens, expert_out * gates[tokens, slots].double().unsqueeze(1))
        start = end
    return {"y": y}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"y": block(global_outputs["y"], 0, rank, world_size(axes))}  # its tokens' rows


def baseline(ctx: RankContext, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
             W: torch.Tensor, y: torch.Tensor) -> None:
    """As Megatron-LM's all-to-all token dispatcher, not overlapped: the (token, expert) pairs sorted
    by expert (hence by rank), counts exchanged, tokens all_to_all_single'd to their experts' ranks,
    regrouped by local expert for one grouped GEMM (grouped_gemm_bf16's baseline: torch._grouped_mm
    on sm_90+), the bf16 outputs sent back the same way and summed with their gate weights in fp32."""
    tokens, k = topk_ids.shape
    local, n = W.shape[0], W.shape[1]
    flat = topk_ids.view(-1)
    order = torch.argsort(flat, stable=True)
    per_expert = torch.bincount(flat, minlength=local * ctx.world_size)
    from_ranks = torch.empty_like(per_expert)  # (W, local): rows for my experts from each rank
    dist.all_to_all_single(from_ranks, per_expert, group=ctx.group)
    from_ranks = from_ranks.view(ctx.world_size, local)
    send_splits = per_expert.view(ctx.world_size, local).sum(dim=1).tolist()
    recv_splits = from_ranks.sum(dim=1).tolist()
    received = x.new_empty((sum(recv_splits), x.shape[1]))
    dist.all_to_all_single(received, x[order // k], recv_splits, send_splits, group=ctx.group)
    experts = torch.arange(local, device=x.device).repeat(ctx.world_size)
    regroup = torch.argsort(torch.repeat_interleave(experts, from_ranks.view(-1)), stable=True)
    offsets = torch.zeros(local + 1, dtype=torch.int32, device=x.device)
    offsets[1:] = from_ranks.sum(dim=0).cumsum(0)
    grouped = x.new_empty((received.shape[0], n))
    grouped_gemm(received[regroup], W, offsets, grouped)
    outputs = torch.empty_like(grouped)
    outputs[regroup] = grouped
    returned = x.new_empty((tokens * k, n))
    dist.all_to_all_single(returned, outputs, send_splits, recv_splits, group=ctx.group)
    combined = torch.empty_like(returned)
    combined[order] = returned
    y.copy_((combined.view(tokens, k, n).float() * topk_weights.unsqueeze(2)).sum(dim=1))
