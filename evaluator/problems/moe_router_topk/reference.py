"""moe_router_topk inputs, reference (fp64) and baseline (torch.topk, then softmax of the K values).

Routing as Qwen3-MoE and Mixtral do it: probabilities = softmax(logits) over the E experts, the K
largest kept, renormalised to sum to 1 (Qwen3's norm_topk_prob; Mixtral's softmax over the top-K
logits is the same numbers). Not DeepSeek-V3's router, which takes sigmoids, adds a bias for load
balancing and limits each token to a few groups of experts first.
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

#: Every pair of logits in a row differs by at least this much: no ties, and no near-ties that a
#: kernel ranking fp32 probabilities instead of logits could order differently.
MIN_GAP = 1e-3
#: `large`: logits of standard deviation 30, whose exponentials overflow fp32 unless the row's
#: largest logit is subtracted first.
LARGE_GAIN = 30.0
#: No logit lies more than this below its row's largest (lower ones are raised to it, then spread):
#: exp(-60) = 8.8e-27, so an fp32 softmax over all E experts keeps every probability a distinct
#: normal number. Version 1 had no bound: under `outliers` a row's largest logit stood ~110 above
#: the rest, the other probabilities underflowed to 0 in fp32, and the Hugging Face router
#: (softmax over E, then topk) picked arbitrary experts among the zeros (on the H200 and the CPU:
#: 5 of 16384 rows), failing an honest kernel on ids whose weight is below 1e-44.
MAX_SPAN = 60.0


def spread(logits: torch.Tensor) -> torch.Tensor:
    """The same values with the i-th smallest of each row raised by i * MIN_GAP: the order within
    each row is kept and neighbours end at least MIN_GAP apart."""
    values, order = logits.sort(dim=-1, stable=True)  # ties (logits raised to the span) in index order
    ranks = torch.arange(logits.shape[-1], dtype=logits.dtype, device=logits.device) * MIN_GAP
    return torch.empty_like(logits).scatter_(-1, order, values + ranks)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    sampler = "normal" if distribution == "large" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"moe_router_topk has no distribution {distribution!r}")
    if axes["K"] > axes["E"]:
        raise ValueError(f"K={axes['K']} must not exceed E={axes['E']}")
    logits = draw("logits", (axes["T"], axes["E"]), axes, seed, device, distribution, sampler)
    if distribution == "large":
        logits.mul_(LARGE_GAIN)
    floor = logits.amax(dim=-1, keepdim=True) - MAX_SPAN
    return {"logits": spread(torch.maximum(logits, floor))}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64: the K largest logits of each row in descending order (no ties exist), their softmax."""
    logits = inputs["logits"].double()
    values, ids = logits.sort(dim=-1, descending=True, stable=True)
    top = values[:, : axes["K"]]
    return {"topk_weights": torch.softmax(top, dim=-1), "topk_ids": ids[:, : axes["K"]]}


def baseline(logits: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> None:
    """torch.topk on the logits (softmax is monotonic, so the same experts as on the
    probabilities), then the softmax of the K values: one pass over the logits, not two."""
    values, ids = torch.topk(logits, topk_ids.shape[1], dim=-1, sorted=True)
    topk_weights.copy_(torch.softmax(values, dim=-1))
    topk_ids.copy_(ids)
