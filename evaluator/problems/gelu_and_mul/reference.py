"""gelu_and_mul inputs, reference (fp64) and baseline (F.gelu(approximate="tanh"), then torch.mul into y)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluator.problems.silu_and_mul.reference import gated_input

#: The tanh approximation's constants (Hendrycks and Gimpel; PyTorch's approximate="tanh").
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBIC = 0.044715


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """As silu_and_mul's: x (T, 2I) = [gate | up]; ``wide_gate`` scales the gate half by 32."""
    return {"x": gated_input("gelu_and_mul", axes, seed, device, distribution)}


def gelu_tanh(gate: torch.Tensor) -> torch.Tensor:
    return 0.5 * gate * (1.0 + torch.tanh(SQRT_2_OVER_PI * (gate + CUBIC * gate**3)))


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact bf16 inputs: the tanh form (not the erf GELU), times up."""
    gate, up = inputs["x"].double().chunk(2, dim=-1)
    return {"y": gelu_tanh(gate) * up}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    """What Gemma's MLP does in eager PyTorch: F.gelu(approximate="tanh") on the gate half (fp32 inside,
    rounded to bf16), times the up half straight into y (torch.mul(out=): no copy)."""
    half = x.shape[-1] // 2
    torch.mul(F.gelu(x[:, :half], approximate="tanh"), x[:, half:], out=y)
