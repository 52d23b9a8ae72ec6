"""rmsnorm inputs, reference (fp64) and baseline (torch ops)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

EPS = 1e-6
TINY_SCALE = 1e-4


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    t, h = axes["T"], axes["H"]
    sampler = "normal" if distribution == "tiny" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"rmsnorm has no distribution {distribution!r}")
    x = draw("x", (t, h), axes, seed, device, distribution, sampler)
    residual = draw("residual", (t, h), axes, seed, device, distribution, sampler)
    if distribution == "tiny":
        x.mul_(TINY_SCALE)
        residual.mul_(TINY_SCALE)
    weight = draw("weight", (h,), axes, seed, device, distribution, "normal").mul_(0.1).add_(1.0)
    return {
        "x": x.to(torch.bfloat16),
        "residual": residual.to(torch.bfloat16),
        "weight": weight.to(torch.bfloat16),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64 from the exact inputs; y normalises the unrounded sum."""
    h = inputs["x"].double() + inputs["residual"].double()
    rms = torch.sqrt(h.square().mean(dim=-1, keepdim=True) + EPS)
    return {"y": h / rms * inputs["weight"].double(), "residual_out": h}


def baseline(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, residual_out: torch.Tensor
) -> None:
    torch.add(x, residual, out=residual_out)
    y.copy_(F.rms_norm(residual_out, (x.shape[-1],), weight, EPS))
