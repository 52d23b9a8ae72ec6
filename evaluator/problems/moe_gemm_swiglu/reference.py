"""moe_gemm_swiglu inputs, reference (fp64, one expert at a time) and baseline (a grouped GEMM,
then silu and multiply).

The first half of an MoE layer's experts: tokens sorted by expert (grouped_gemm_bf16's X and
ragged group_offsets), each expert's gate and up projections stacked in W13 (G, 2I, K) (rows
0..I-1 the gate W1, rows I..2I-1 the up projection W3, as vLLM and SGLang store w13), and
Y[rows of g] = silu(X W1[g]^T) * (X W3[g]^T).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw
from evaluator.problems.grouped_gemm_bf16.reference import group_offsets, grouped_mm_works


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """X ~ D, W13 ~ D / sqrt(K) (projections ~ O(1)); group sizes as grouped_gemm_bf16's (ragged,
    G // 8 empty, one tiny), from the seed alone."""
    t, g, i, k = axes["T"], axes["G"], axes["I"], axes["K"]
    if distribution not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"moe_gemm_swiglu has no distribution {distribution!r}")
    if t < g:
        raise ValueError(f"T={t} must be at least G={g}")
    x = draw("X", (t, k), axes, seed, device, distribution)
    w = draw("W13", (g, 2 * i, k), axes, seed, device, distribution).div_(math.sqrt(k))
    return {
        "X": x.to(torch.bfloat16),
        "W13": w.to(torch.bfloat16),
        "group_offsets": group_offsets({"T": t, "G": g}, seed, device),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    x, w = inputs["X"].double(), inputs["W13"].double()
    i = axes["I"]
    offsets = inputs["group_offsets"].tolist()
    y = torch.empty((axes["T"], i), dtype=torch.float64, device=x.device)
    for group in range(axes["G"]):
        start, end = offsets[group], offsets[group + 1]
        h = x[start:end] @ w[group].t()
        y[start:end] = F.silu(h[:, :i]) * h[:, i:]
    return {"Y": y}


def baseline(X: torch.Tensor, W13: torch.Tensor, group_offsets: torch.Tensor, Y: torch.Tensor) -> None:
    """torch._grouped_mm into (T, 2I) bf16 (CUDA, sm_90+; else a matmul per expert), then
    F.silu(gate) * up in bf16 into Y: the projections make a round trip through memory."""
    i = Y.shape[1]
    if grouped_mm_works(X):
        h = torch._grouped_mm(X, W13.transpose(1, 2), offs=group_offsets[1:])
    else:
        h = torch.empty((X.shape[0], 2 * i), dtype=X.dtype, device=X.device)
        offsets = group_offsets.tolist()
        for group in range(W13.shape[0]):
            start, end = offsets[group], offsets[group + 1]
            if end > start:
                torch.matmul(X[start:end], W13[group].t(), out=h[start:end])
    torch.mul(F.silu(h[:, :i]), h[:, i:], out=Y)
