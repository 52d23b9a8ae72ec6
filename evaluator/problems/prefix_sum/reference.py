"""prefix_sum inputs, reference (fp64) and baseline (torch.cumsum)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import draw_signed_or_positive


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """A basic distribution as drawn, or `positive`: the absolute values of normal ones."""
    return {
        "x": draw_signed_or_positive(
            "prefix_sum", "x", (axes["R"], axes["N"]), axes, seed, device, distribution
        )
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact fp32 inputs: off by at most ~N * 2^-53 of the partial sums' size."""
    return {"y": torch.cumsum(inputs["x"].double(), dim=-1)}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    torch.cumsum(x, dim=-1, out=y)
