"""gemm_bf16 inputs, reference (fp64) and baseline (cuBLAS through torch.matmul)."""

from __future__ import annotations

import math

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, row_scales


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    m, n, k = axes["M"], axes["N"], axes["K"]
    sampler = "normal" if distribution == "rowscale" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"gemm_bf16 has no distribution {distribution!r}")
    a = draw("A", (m, k), axes, seed, device, distribution, sampler)
    b = draw("B", (n, k), axes, seed, device, distribution, sampler).div_(math.sqrt(k))
    if distribution == "rowscale":
        a.mul_(row_scales(m, axes, seed, device, "A"))
        b.mul_(row_scales(n, axes, seed, device, "B"))
    return {"A": a.to(torch.bfloat16), "B": b.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64, from the exact bf16 input values: immune to TF32 settings, exact enough."""
    a = inputs["A"].double()
    b = inputs["B"].double()
    return {"C": a @ b.t()}


def baseline(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    torch.matmul(A, B.t(), out=C)
