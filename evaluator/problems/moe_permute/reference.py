"""moe_permute inputs, reference and baseline (a stable argsort, then index_select).

The order: the T*K (token, slot) pairs sorted by expert, within an expert by token, then by slot,
i.e. by the flat index t*K + j (a token names K distinct experts, so two slots of one token never
meet in one expert; the slot rule only completes the definition). permuted[r] is the hidden
state of the pair placed at row r; expert e owns rows expert_offsets[e] .. expert_offsets[e+1] - 1;
dest_rows[t, j] is the row of pair (t, j), so a combine step can gather without atomics.
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import draw, generator

#: `skewed` and `hot`: expert popularity log-normal with this sigma (a few experts draw most
#: tokens, as in an unbalanced MoE layer).
POPULARITY_SIGMA = 1.5
DISTRIBUTIONS = ("balanced", "skewed", "hot")


def routing(axes: dict[str, int], seed: int, device: str | torch.device, distribution: str) -> torch.Tensor:
    """(T, K) int32 experts per token, K distinct ones, in no particular order of expert.

    balanced: every set of K experts equally likely. skewed: K experts drawn without replacement
    in proportion to a log-normal popularity (Gumbel top-k). hot: one expert in every token's set,
    the other K-1 skewed among a quarter of the experts (at least K - 1 of them): most experts get
    no token at all."""
    t, e, k = axes["T"], axes["E"], axes["K"]
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"moe_permute has no distribution {distribution!r}")
    if k > e:
        raise ValueError(f"K={k} must not exceed E={e}")
    gen = generator(device, seed, distribution, axes, "topk_ids")
    noise = torch.rand((t, e), generator=gen, device=device, dtype=torch.float64).clamp_min_(1e-300)
    gumbel = -torch.log(-torch.log(noise))
    if distribution == "balanced":
        return gumbel.topk(k, dim=-1).indices.to(torch.int32)
    popularity = torch.randn((e,), generator=gen, device=device, dtype=torch.float64) * POPULARITY_SIGMA
    scores = gumbel + popularity  # log-popularity + Gumbel noise: sampling without replacement
    if distribution == "skewed":
        return scores.topk(k, dim=-1).indices.to(torch.int32)
    experts = torch.randperm(e, generator=gen, device=device)
    hot, pool = experts[0], experts[1 : 1 + max(k - 1, e // 4)]
    others = scores[:, pool].topk(k - 1, dim=-1).indices
    ids = torch.cat([hot.expand(t, 1), pool[others]], dim=-1)
    slots = torch.rand((t, k), generator=gen, device=device).argsort(dim=-1)  # hot not always first
    return ids.gather(1, slots).to(torch.int32)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "balanced"
) -> dict[str, torch.Tensor]:
    hidden = draw("hidden", (axes["T"], axes["H"]), axes, seed, device, distribution, "normal")
    return {"hidden": hidden.to(torch.bfloat16), "topk_ids": routing(axes, seed, device, distribution)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """The order by (expert, flat index), written out with a key no two pairs share."""
    t, k, e = axes["T"], axes["K"], axes["E"]
    flat = inputs["topk_ids"].reshape(-1).long()
    pairs = torch.arange(t * k, device=flat.device)
    order = torch.sort(flat * (t * k) + pairs).indices  # unique keys: any sort gives this order
    dest = torch.empty_like(order)
    dest[order] = pairs
    counts = torch.bincount(flat, minlength=e)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    return {
        "permuted": inputs["hidden"].double()[order // k],
        "expert_offsets": offsets,
        "dest_rows": dest.view(t, k),
    }


def baseline(
    hidden: torch.Tensor,
    topk_ids: torch.Tensor,
    permuted: torch.Tensor,
    expert_offsets: torch.Tensor,
    dest_rows: torch.Tensor,
) -> None:
    """A stable sort of the expert ids gives the order and the sorted ids together; each expert's
    first row is a binary search in the sorted ids. Version 1 took argsort (which drops the sorted
    ids) and bincount + cumsum for the offsets, and bincount reads the ids' range back to the host."""
    flat = topk_ids.view(-1)
    sorted_ids, order = torch.sort(flat, stable=True)  # row r holds pair order[r]
    torch.index_select(hidden, 0, order // topk_ids.shape[1], out=permuted)
    rows = torch.arange(flat.numel(), dtype=torch.int32, device=flat.device)
    dest_rows.view(-1).index_copy_(0, order, rows)
    experts = torch.arange(expert_offsets.numel(), dtype=sorted_ids.dtype, device=flat.device)
    expert_offsets.copy_(torch.searchsorted(sorted_ids, experts))
