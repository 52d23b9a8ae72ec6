"""vector_add inputs, reference (fp64) and baseline (torch.add)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

CANCELLATION_NOISE = 1e-3


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    n = (axes["N"],)
    if distribution == "cancellation":
        a = draw("a", n, axes, seed, device, distribution, sampler="normal")
        noise = draw("b", n, axes, seed, device, distribution, sampler="normal")
        return {"a": a, "b": noise.mul_(CANCELLATION_NOISE).sub_(a)}
    if distribution not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"vector_add has no distribution {distribution!r}")
    return {
        "a": draw("a", n, axes, seed, device, distribution),
        "b": draw("b", n, axes, seed, device, distribution),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64: exact for the sum of two fp32 values."""
    return {"c": inputs["a"].double() + inputs["b"].double()}


def baseline(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    torch.add(a, b, out=c)
