"""gemm_fp8 inputs, reference (fp64) and baseline (cuBLASLt through torch._scaled_mm)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import generator, tn_gemm_operands

E4M3_MAX = 448.0


def _quantise(
    x: torch.Tensor, name: str, axes: dict[str, int], seed: int, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 values and their fp32 scale: amax / 448 times a seeded factor in [1, 2)."""
    jitter = torch.rand((1,), generator=generator(device, seed, "scale", axes, name), device=device)
    scale = (x.abs().amax() / E4M3_MAX * (1 + jitter)).float()
    return (x / scale).to(torch.float8_e4m3fn), scale


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    x, y = tn_gemm_operands("gemm_fp8", axes, seed, device, distribution)
    a, scale_a = _quantise(x, "A", axes, seed, device)
    b, scale_b = _quantise(y, "B", axes, seed, device)
    return {"A": a, "B": b, "scale_a": scale_a, "scale_b": scale_b}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact e4m3 values and scales."""
    a = inputs["A"].double() * inputs["scale_a"].double()
    b = inputs["B"].double() * inputs["scale_b"].double()
    return {"C": a @ b.t()}


def baseline(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    # cuBLASLt wants the second operand column-major: B (N, K) row-major, transposed, is exactly that.
    torch._scaled_mm(A, B.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, out=C)
