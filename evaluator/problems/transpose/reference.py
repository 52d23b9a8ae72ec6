"""transpose inputs, reference (the exact values, moved) and baseline (out.copy_(x.t()))."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator

#: ``tiles``: an element is 1 + 16 (row mod 16) + (column mod 16), shifted by seeded offsets.
TILE = 16


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """x (M, N) bf16 of a basic sampler, or ``tiles``: x[i, j] = 1 + 16 ((i + a) mod 16) + (j + b) mod
    16 with seeded offsets a, b, the integers 1 to 256 (exact in bf16; no zero, whose allowed error
    would be 0). Inside every 16 x 16 tile each value appears once, so an element moved within its
    tile (a tile transposed as a block but not inside, a row and column swapped in shared memory)
    lands on a different value."""
    m, n = axes["M"], axes["N"]
    if distribution == "tiles":
        gen = generator(device, seed, distribution, axes, "tile_offsets")
        a, b = torch.randint(0, TILE, (2,), generator=gen, device=device).tolist()
        rows = (torch.arange(m, device=device) + a) % TILE
        columns = (torch.arange(n, device=device) + b) % TILE
        x = (1 + TILE * rows[:, None] + columns[None, :]).float()
    elif distribution in BASIC_DISTRIBUTIONS:
        x = draw("x", (m, n), axes, seed, device, distribution)
    else:
        raise ValueError(f"transpose has no distribution {distribution!r}")
    return {"x": x.to(torch.bfloat16)}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    return {"out": inputs["x"].double().t().contiguous()}


def baseline(x: torch.Tensor, out: torch.Tensor) -> None:
    """A strided copy into the contiguous output (torch's transposing copy kernel on CUDA)."""
    out.copy_(x.t())
