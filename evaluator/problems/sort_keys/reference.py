"""sort_keys inputs, reference (the keys sorted, exactly) and baseline (torch.sort)."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import generator

DISTRIBUTIONS = ("uniform", "few_unique", "nearly_sorted", "descending")
INT32_MIN, INT32_END = -(2**31), 2**31
#: few_unique: every row's keys come from this many distinct values.
FEW = 16
#: nearly_sorted: this fraction of positions swapped with a random other one after sorting.
SWAP_FRACTION = 0.01


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "uniform"
) -> dict[str, torch.Tensor]:
    """x (R, N) int32 over the whole int32 range (negative keys included: a radix sort must flip
    the sign bit). few_unique: 16 seeded values per row (most keys have equal neighbours).
    nearly_sorted: each row ascending, then 1% of positions swapped at random. descending: each
    row in descending order (the worst case of a naive quicksort, a reversal for a radix sort)."""
    rows, n = axes["R"], axes["N"]
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"sort_keys has no distribution {distribution!r}")
    gen = generator(device, seed, distribution, axes, "x")
    keys = torch.randint(INT32_MIN, INT32_END, (rows, n), generator=gen, device=device, dtype=torch.int64)
    if distribution == "few_unique":
        values = torch.randint(
            INT32_MIN, INT32_END, (rows, FEW), generator=gen, device=device, dtype=torch.int64
        )
        keys = values.gather(1, torch.randint(0, FEW, (rows, n), generator=gen, device=device))
    elif distribution == "nearly_sorted":
        keys = keys.sort(dim=-1).values
        swaps = max(1, int(n * SWAP_FRACTION))
        first = torch.randint(0, n, (rows, swaps), generator=gen, device=device)
        second = torch.randint(0, n, (rows, swaps), generator=gen, device=device)
        a, b = keys.gather(1, first), keys.gather(1, second)
        keys.scatter_(1, first, b).scatter_(1, second, a)
    elif distribution == "descending":
        keys = keys.sort(dim=-1, descending=True).values
    return {"x": keys.to(torch.int32).contiguous()}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """Exact: the int32 keys sorted as int64, compared as fp64 (int32 values are exact there)."""
    return {"y": inputs["x"].long().sort(dim=-1).values.double()}


def baseline(x: torch.Tensor, y: torch.Tensor) -> None:
    """torch.sort (CUDA: CUB's segmented radix sort of key-index pairs), the values copied into y;
    torch has no keys-only sort, so it also writes the int64 indices nobody asked for."""
    y.copy_(torch.sort(x, dim=-1).values)
