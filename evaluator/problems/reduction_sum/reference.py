"""reduction_sum inputs, reference (fp64) and baseline (torch.sum)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import draw_signed_or_positive


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """A basic distribution as drawn, or `positive`: the absolute values of normal ones."""
    return {
        "x": draw_signed_or_positive(
            "reduction_sum", "x", (axes["R"], axes["N"]), axes, seed, device, distribution
        )
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact fp32 inputs (its own error ~N 2^-53 of the partial sums)."""
    return {"y": inputs["x"].double().sum(dim=-1)}


def error_scale(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """Each row's L2 norm, the scale of its sum's rounding error (atol_scale "inputs"): a row of
    mixed signs can sum to nearly zero, its partial sums cannot, so the sum itself is no scale."""
    return {"y": inputs["x"].double().square().sum(dim=-1).sqrt()}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    torch.sum(x, dim=-1, out=y)
