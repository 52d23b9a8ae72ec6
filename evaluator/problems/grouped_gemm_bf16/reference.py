"""grouped_gemm_bf16 inputs, reference (fp64, one GEMM per group) and baseline."""

from __future__ import annotations

import math

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, derived_seed, draw
from evaluator.problems.grouped_gemm_bf16.counts import empty_groups


def group_sizes(axes: dict[str, int], seed: int) -> list[int]:
    """Ragged sizes summing to T: ``empty_groups(G)`` empty, one tiny (1-3 rows), the rest skewed.

    Drawn on the CPU from the seed alone: small, and the same on every device.
    """
    t, g = axes["T"], axes["G"]
    gen = torch.Generator().manual_seed(derived_seed(seed, "group_sizes", axes, "group_offsets"))
    order = torch.randperm(g, generator=gen).tolist()
    # order[:empty] stay empty; then one tiny group; the rest share what is left.
    empty = empty_groups(g)
    tiny, rest = order[empty], order[empty + 1 :]
    sizes = [0] * g
    sizes[tiny] = 1 + int(torch.randint(0, 3, (1,), generator=gen))
    if not rest:
        sizes[tiny] = t
        return sizes
    weights = torch.rand(len(rest), generator=gen, dtype=torch.float64).pow(2).add(0.05)
    remaining = t - sizes[tiny] - len(rest)  # every other group gets at least one row
    shares = (weights / weights.sum() * remaining).floor().long().tolist()
    shares[0] += remaining - sum(shares)
    for group, share in zip(rest, shares, strict=True):
        sizes[group] = 1 + share
    return sizes


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    t, g, n, k = axes["T"], axes["G"], axes["N"], axes["K"]
    if distribution not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"grouped_gemm_bf16 has no distribution {distribution!r}")
    if t < g:
        raise ValueError(f"T={t} must be at least G={g}")
    x = draw("X", (t, k), axes, seed, device, distribution)
    w = draw("W", (g, n, k), axes, seed, device, distribution).div_(math.sqrt(k))
    return {
        "X": x.to(torch.bfloat16),
        "W": w.to(torch.bfloat16),
        "group_offsets": group_offsets(axes, seed, device),
    }


def group_offsets(axes: dict[str, int], seed: int, device: str | torch.device) -> torch.Tensor:
    """(G+1,) int32 cumulative offsets of ``group_sizes(axes, seed)``, starting at 0."""
    offsets = [0]
    for size in group_sizes(axes, seed):
        offsets.append(offsets[-1] + size)
    return torch.tensor(offsets, dtype=torch.int32, device=device)


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64, one GEMM per group; rows of empty groups do not exist."""
    x, w = inputs["X"].double(), inputs["W"].double()
    offsets = inputs["group_offsets"].tolist()
    y = torch.empty((axes["T"], axes["N"]), dtype=torch.float64, device=x.device)
    for group in range(axes["G"]):
        start, end = offsets[group], offsets[group + 1]
        y[start:end] = x[start:end] @ w[group].t()
    return {"Y": y}


def grouped_mm_works(x: torch.Tensor) -> bool:
    # torch._grouped_mm exists from torch 2.8 and runs on sm_90 and newer CUDA devices only.
    if not hasattr(torch, "_grouped_mm") or x.device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(x.device) >= (9, 0)


def baseline(X: torch.Tensor, W: torch.Tensor, group_offsets: torch.Tensor, Y: torch.Tensor) -> None:
    if grouped_mm_works(X):
        Y.copy_(torch._grouped_mm(X, W.transpose(1, 2), offs=group_offsets[1:]))
        return
    offsets = group_offsets.tolist()
    for group in range(W.shape[0]):
        start, end = offsets[group], offsets[group + 1]
        if end > start:
            torch.matmul(X[start:end], W[group].t(), out=Y[start:end])
