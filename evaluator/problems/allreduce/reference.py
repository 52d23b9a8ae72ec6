"""allreduce inputs, reference (fp64) and baseline (torch.distributed.all_reduce)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from evaluator.problems._multi import world_size
from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

if TYPE_CHECKING:
    from evaluator.harness.multi.rank_context import RankContext


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """The global data: row r of ``x`` (W, N) is rank r's contribution, rounded to bf16.

    ``rank_scaled``: normal values, rank r's row scaled by 2^(r - (W-1)/2), so the ranks' terms
    differ by up to 2^(W-1) in magnitude (a kernel that drops or double-counts a small rank's
    contribution, or sums in a precision that loses the small terms, shows)."""
    w = world_size(axes)
    sampler = "normal" if distribution == "rank_scaled" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"allreduce has no distribution {distribution!r}")
    x = draw("x", (w, axes["N"]), axes, seed, device, distribution, sampler)
    if distribution == "rank_scaled":
        exponents = torch.arange(w, device=device, dtype=torch.float32) - (w - 1) / 2
        x.mul_(torch.exp2(exponents).unsqueeze(1))
    return {"x": x.to(torch.bfloat16)}


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"x": global_inputs["x"][rank].contiguous()}


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """The exact sum (fp64 holds a sum of W bf16 values exactly for W <= 2^40)."""
    return {"y": global_inputs["x"].double().sum(dim=0)}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"y": global_outputs["y"]}  # every rank holds the whole sum


def baseline(ctx: RankContext, x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(x)
    dist.all_reduce(y, op=dist.ReduceOp.SUM, group=ctx.group)
