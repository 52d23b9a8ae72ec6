"""gemm_bf16 inputs, reference (fp64) and baseline (cuBLAS through torch.matmul)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import tn_gemm_operands


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    a, b = tn_gemm_operands("gemm_bf16", axes, seed, device, distribution)
    return {"A": a.to(torch.bfloat16), "B": b.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64, from the exact bf16 input values: immune to TF32 settings, exact enough."""
    a = inputs["A"].double()
    b = inputs["B"].double()
    return {"C": a @ b.t()}


def baseline(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    torch.matmul(A, B.t(), out=C)
