"""softmax inputs, reference (fp64) and baseline (torch.softmax in fp32)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

LARGE_SCALE = 30.0


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    sampler = "normal" if distribution == "large" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"softmax has no distribution {distribution!r}")
    x = draw("x", (axes["R"], axes["C"]), axes, seed, device, distribution, sampler)
    if distribution == "large":
        x.mul_(LARGE_SCALE)
    return {"x": x.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    return {"y": torch.softmax(inputs["x"].double(), dim=-1)}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(torch.softmax(x, dim=-1, dtype=torch.float32))
