"""moe_unpermute inputs, reference (fp64) and baseline (index_select, then one batched matmul).

The combine step of a mixture-of-experts layer, after the grouped expert GEMM: expert_out (T*K, H)
holds the experts' output rows in expert-sorted order (moe_permute's layout), dest_rows (T, K) the
row of each (token, slot) pair, topk_weights (T, K) the router's weights. out[t] = sum over j of
topk_weights[t, j] * expert_out[dest_rows[t, j]].
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import draw, generator
from evaluator.problems.moe_permute.reference import DISTRIBUTIONS, routing


def destination_rows(topk_ids: torch.Tensor) -> torch.Tensor:
    """moe_permute's dest_rows: the pairs sorted by (expert, flat index), each pair's row."""
    t, k = topk_ids.shape
    flat = topk_ids.reshape(-1).long()
    pairs = torch.arange(t * k, device=flat.device)
    order = torch.sort(flat * (t * k) + pairs).indices
    dest = torch.empty_like(order)
    dest[order] = pairs
    return dest.view(t, k).to(torch.int32)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "balanced"
) -> dict[str, torch.Tensor]:
    """expert_out ~ N(0,1) bf16; the routing of moe_permute's distribution (balanced, skewed, hot)
    gives dest_rows; topk_weights = softmax of K N(0,1) logits per token (fp32, summing to 1)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"moe_unpermute has no distribution {distribution!r}")
    t, h, k = axes["T"], axes["H"], axes["K"]
    expert_out = draw("expert_out", (t * k, h), axes, seed, device, distribution, "normal")
    gen = generator(device, seed, distribution, axes, "topk_weights")
    weights = torch.softmax(torch.randn((t, k), generator=gen, device=device), dim=-1)
    return {
        "expert_out": expert_out.to(torch.bfloat16),
        "dest_rows": destination_rows(routing(axes, seed, device, distribution)),
        "topk_weights": weights,
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    rows = inputs["expert_out"].double()[inputs["dest_rows"].long()]  # (T, K, H)
    return {"out": (inputs["topk_weights"].double()[..., None] * rows).sum(dim=1)}


def baseline(
    expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_weights: torch.Tensor, out: torch.Tensor
) -> None:
    """The K rows of each token gathered (index_select), then one batched (1 x K) @ (K x H) product
    per token in bf16 with fp32 accumulation (cuBLAS), written into out: two kernels; the weights
    are rounded to bf16 for the product (2^-9 relative)."""
    t, k = dest_rows.shape
    gathered = expert_out.index_select(0, dest_rows.view(-1)).view(t, k, -1)
    torch.bmm(topk_weights.to(expert_out.dtype).unsqueeze(1), gathered, out=out.unsqueeze(1))
