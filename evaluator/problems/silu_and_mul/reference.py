"""silu_and_mul inputs, reference (fp64) and baseline (F.silu, then torch.mul into y)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw

#: ``wide_gate``: the gate half is scaled by this: gates up to ~+-140 saturate the sigmoid both ways
#: and overflow fp32 exp (past 88.7) in a formulation that exponentiates +gate.
WIDE_GATE_SCALE = 32.0


def gated_input(
    problem: str, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str
) -> torch.Tensor:
    """x (T, 2I) bf16: the gate half x[:, :I] then the up half x[:, I:] (vLLM's layout), both of the
    basic sampler; under ``wide_gate`` (normal values) the gate half is multiplied by WIDE_GATE_SCALE."""
    t, i = axes["T"], axes["I"]
    sampler = "normal" if distribution == "wide_gate" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"{problem} has no distribution {distribution!r}")
    x = draw("x", (t, 2 * i), axes, seed, device, distribution, sampler)
    if distribution == "wide_gate":
        x[:, :i] *= WIDE_GATE_SCALE
    return x.to(torch.bfloat16)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    return {"x": gated_input("silu_and_mul", axes, seed, device, distribution)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact bf16 inputs: gate * sigmoid(gate) * up."""
    gate, up = inputs["x"].double().chunk(2, dim=-1)
    return {"y": gate * torch.sigmoid(gate) * up}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    """What a model's MLP does in eager PyTorch: F.silu on the gate half (fp32 inside, rounded to bf16),
    times the up half straight into y (torch.mul(out=): no copy)."""
    half = x.shape[-1] // 2
    torch.mul(F.silu(x[:, :half]), x[:, half:], out=y)
