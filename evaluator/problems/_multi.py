"""Shared pieces of the multi-GPU problems' ``reference.py`` modules (imports torch).

A multi-GPU problem's reference module has five functions (docs/multigpu.md, "Problems"):

- ``generate_inputs(axes, seed, device, distribution) -> dict``: the GLOBAL data of one call (what
  all ranks hold together), drawn as any problem's inputs are (``_sampling``). ``axes`` include
  ``world_size``.
- ``rank_inputs(global_inputs, axes, rank) -> dict``: what rank ``rank`` holds, in the per-rank
  shapes ``problem.toml`` declares.
- ``reference(global_inputs, axes) -> dict``: the global outputs, in fp64, from the global data.
- ``rank_outputs(global_outputs, axes, rank) -> dict``: rank ``rank``'s part of them.
- ``baseline(ctx, *inputs, *outputs)``: the library path on one rank (``ctx``: ``RankContext``).
"""

from __future__ import annotations

import torch

from evaluator.problems import WORLD_SIZE_AXIS


def world_size(axes: dict[str, int]) -> int:
    return int(axes[WORLD_SIZE_AXIS])


def block(tensor: torch.Tensor, dim: int, rank: int, parts: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous block of ``tensor`` along ``dim`` (``parts`` equal blocks), as a
    contiguous tensor of its own."""
    size = tensor.shape[dim] // parts
    return tensor.narrow(dim, rank * size, size).contiguous()
