"""gemv_bf16 inputs, reference (fp64) and baseline (cuBLAS through torch.matmul)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import tn_gemm_operands


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """x plays the GEMM's A (B rows of K), W its B (N rows of K, scaled by 1/sqrt(K))."""
    gemm_axes = {"M": axes["B"], "N": axes["N"], "K": axes["K"]}
    x, w = tn_gemm_operands("gemv_bf16", gemm_axes, seed, device, distribution)
    return {"x": x.to(torch.bfloat16), "W": w.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64, from the exact bf16 input values: immune to TF32 settings, exact enough."""
    return {"y": inputs["x"].double() @ inputs["W"].double().t()}


def baseline(x: torch.Tensor, W: torch.Tensor, y: torch.Tensor) -> None:
    torch.matmul(x, W.t(), out=y)
