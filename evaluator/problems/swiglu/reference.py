"""swiglu inputs, reference (fp64) and baseline (torch ops)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, row_scales


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    t, d, f = axes["T"], axes["D"], axes["F"]
    sampler = "normal" if distribution == "rowscale" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"swiglu has no distribution {distribution!r}")
    x = draw("x", (t, d), axes, seed, device, distribution, sampler)
    if distribution == "rowscale":
        x.mul_(row_scales(t, axes, seed, device, "x"))
    w1 = draw("W1", (f, d), axes, seed, device, distribution, sampler).div_(math.sqrt(d))
    w3 = draw("W3", (f, d), axes, seed, device, distribution, sampler).div_(math.sqrt(d))
    return {"x": x.to(torch.bfloat16), "W1": w1.to(torch.bfloat16), "W3": w3.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    x = inputs["x"].double()
    h1 = x @ inputs["W1"].double().t()
    h3 = x @ inputs["W3"].double().t()
    return {"out": h1 * torch.sigmoid(h1) * h3}


def baseline(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor, out: torch.Tensor) -> None:
    h1 = torch.matmul(x, W1.t())
    h3 = torch.matmul(x, W3.t())
    torch.mul(F.silu(h1), h3, out=out)
