"""Example submission for reduction_sum: y (R,) fp32, the sum of each row of x (R, N) fp32.

Two passes, as a GPU reduction is built: each row cut into chunks of 4096 (the last one padded
with zeros), every chunk summed, then the chunk sums summed. Honest and slower than one kernel:
the chunk sums make a round trip through memory and the padding copies the row when N is not a
multiple of the chunk.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 4096


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    rows, n = x.shape
    padded = F.pad(x, (0, -n % CHUNK)) if n % CHUNK else x
    partial = padded.view(rows, -1, CHUNK).sum(dim=-1)  # (R, chunks)
    torch.sum(partial, dim=-1, out=y)
