"""Example submission for prefix_sum: y = cumsum(x, dim=-1), x and y (R, N) fp32.

A blocked two-pass scan in torch, the structure of a GPU scan: each row is cut into tiles of TILE
values (the tail padded with zeros); pass 1 scans inside every tile; pass 2 scans the tile totals
(exclusively: the carry into each tile) and adds each tile's carry to its values. Every output goes
through one tile's scan and one carry, never a serial chain of N fp32 adds. Honest and slower
than the baseline (a padded copy of x and three passes over memory).
"""

from __future__ import annotations

import torch

TILE = 1024


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    rows, n = x.shape
    tiles = -(-n // TILE)
    padded = torch.zeros((rows, tiles * TILE), dtype=x.dtype, device=x.device)
    padded[:, :n] = x
    local = padded.view(rows, tiles, TILE).cumsum(dim=-1)  # pass 1: scan inside each tile
    carry = torch.zeros((rows, tiles, 1), dtype=x.dtype, device=x.device)
    carry[:, 1:, 0] = local[:, :-1, -1].cumsum(dim=-1)  # pass 2: carry = sum of the tiles before
    local += carry
    y.copy_(local.view(rows, -1)[:, :n])
