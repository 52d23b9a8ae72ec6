"""layernorm inputs, reference (fp64) and baseline (F.layer_norm)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator

EPS = 1e-5
TINY_SCALE = 1e-3
#: ``offset``: each row's values are shifted by a constant drawn from U(-OFFSET, OFFSET).
OFFSET = 16.0
STRUCTURED = ("offset", "tiny")


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    t, h = axes["T"], axes["H"]
    sampler = "normal" if distribution in STRUCTURED else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"layernorm has no distribution {distribution!r}")
    x = draw("x", (t, h), axes, seed, device, distribution, sampler)
    if distribution == "tiny":
        x.mul_(TINY_SCALE)
    if distribution == "offset":
        gen = generator(device, seed, distribution, axes, "row_offsets")
        x.add_(torch.rand((t, 1), generator=gen, device=device).mul_(2 * OFFSET).sub_(OFFSET))
    weight = draw("weight", (h,), axes, seed, device, distribution, "normal").mul_(0.1).add_(1.0)
    bias = draw("bias", (h,), axes, seed, device, distribution, "normal").mul_(0.1)
    return {
        "x": x.to(torch.bfloat16),
        "weight": weight.to(torch.bfloat16),
        "bias": bias.to(torch.bfloat16),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64 from the exact inputs: the biased variance of the centred row (two passes)."""
    x = inputs["x"].double()
    centred = x - x.mean(dim=-1, keepdim=True)
    std = torch.sqrt(centred.square().mean(dim=-1, keepdim=True) + EPS)
    return {"y": centred / std * inputs["weight"].double() + inputs["bias"].double()}


def baseline(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(F.layer_norm(x, (x.shape[-1],), weight, bias, EPS))
