"""histogram inputs, reference (exact counts) and baseline (torch.bincount)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import generator

DISTRIBUTIONS = ("uniform", "zipf", "hot", "sorted")
#: zipf: bin of popularity rank r drawn with probability proportional to 1 / (r + 1)^ZIPF_EXPONENT.
ZIPF_EXPONENT = 1.1
#: hot: this fraction of the keys falls in one bin (every thread of a block on one counter).
HOT_FRACTION = 0.9


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "uniform"
) -> dict[str, torch.Tensor]:
    """x (N,) int32 in [0, B).

    uniform: every bin equally likely. zipf: the bins ranked by a seeded permutation, rank r drawn
    with probability ~ 1/(r+1)^1.1 (word and token frequencies: a few bins take most keys). hot:
    90% of the keys in one seeded bin, the rest uniform (the worst contention on one counter).
    sorted: uniform keys in ascending order (long runs of one bin: every lane of a warp adds to
    the same counter at once)."""
    n, bins = axes["N"], axes["B"]
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"histogram has no distribution {distribution!r}")
    gen = generator(device, seed, distribution, axes, "x")
    uniform = torch.randint(0, bins, (n,), generator=gen, device=device)
    if distribution == "zipf":
        weights = (torch.arange(bins, device=device, dtype=torch.float64) + 1).pow(-ZIPF_EXPONENT)
        cdf = weights.cumsum(0) / weights.sum()
        draws = torch.rand((n,), generator=gen, device=device, dtype=torch.float64)
        ranks = torch.searchsorted(cdf, draws).clamp_(max=bins - 1)
        x = torch.randperm(bins, generator=gen, device=device)[ranks]
    elif distribution == "hot":
        hot = torch.randint(0, bins, (1,), generator=gen, device=device)
        x = torch.where(torch.rand((n,), generator=gen, device=device) < HOT_FRACTION, hot, uniform)
    elif distribution == "sorted":
        x = uniform.sort().values
    else:
        x = uniform
    return {"x": x.to(torch.int32)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """Exact: bincount counts in int64; compared as fp64 (exact below 2^53)."""
    return {"counts": torch.bincount(inputs["x"].long(), minlength=axes["B"]).double()}


def baseline(x: torch.Tensor, counts: torch.Tensor) -> None:
    """On CUDA torch.histc with the range given, [0, B) in B bins: one kernel (shared-memory counters
    per block when the bins fit, else global atomics), the int32 counts copied into the output.
    torch.bincount, version 1's baseline, reads the keys' min and max back to the host to size its
    output: two device syncs and a pass more per call. The CPU's histc takes no integer input, so
    the CPU runs bincount."""
    if not x.is_cuda:
        bincount_baseline(x, counts)
        return
    bins = counts.shape[0]
    counts.copy_(torch.histc(x, bins=bins, min=0, max=bins))


def bincount_baseline(x: torch.Tensor, counts: torch.Tensor) -> None:
    """Version 1's baseline (the CPU's still): torch.bincount, its int64 result copied into counts."""
    counts.copy_(torch.bincount(x, minlength=counts.shape[0]))
