"""fp8_quant_per_block inputs, reference (fp64) and baseline (eager torch on a (T, H/128, 128) view).

The rules, the reference and the input distributions are fp8_quant_per_token's, with groups of 128
consecutive values of a row in place of whole rows.
"""

from __future__ import annotations

import torch

from evaluator.problems.fp8_quant_per_block.counts import GROUP
from evaluator.problems.fp8_quant_per_token.reference import EPS, FP8_MAX, quantisation_input, quantise_groups


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    return {"x": quantisation_input("fp8_quant_per_block", axes, seed, device, distribution, GROUP)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    q, scales = quantise_groups(inputs["x"], GROUP)
    return {"q": q, "scales": scales}


def baseline(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    """Eager torch on the (T, H/128, 128) view: each group's amax (vector_norm with ord=inf), the fp32
    scales written straight into ``scales``, then x / scale in fp32 written straight into q as e4m3
    (``div(out=)``, one kernel). Version 2; bitwise version 1's bytes."""
    groups = _group_scales(x, scales)
    torch.div(groups, scales.unsqueeze(-1), out=q.view(groups.shape))


def copy_baseline(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    """Version 1's baseline: the quotient as an fp32 tensor, then a second kernel casts it into q."""
    groups = _group_scales(x, scales)
    q.view(groups.shape).copy_(groups / scales.unsqueeze(-1))


def _group_scales(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Each group's fp32 scale into ``scales``; returns x as (T, H/128, 128) groups."""
    t, h = x.shape
    groups = x.view(t, h // GROUP, GROUP)
    amax = torch.linalg.vector_norm(groups, float("inf"), dim=-1).float()
    torch.div(amax.clamp_min_(EPS), FP8_MAX, out=scales)
    return groups
