"""softmax inputs, reference (fp64) and baseline (torch.softmax on the bf16 input, fp32 inside)."""

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
    """What a user calls: torch's softmax on the bf16 input, written straight into y. Its kernels (CUDA
    and CPU) accumulate in fp32 and round y to bf16 once. Version 1 asked for an fp32 result
    (``dtype=torch.float32``) and copied it into y: the same arithmetic, but twice the output bytes
    and a second kernel."""
    torch.softmax(x, dim=-1, out=y)
