"""Example submission for softmax: the row max, exponentials and sum in fp32, with torch ops."""

from __future__ import annotations

import torch


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    scores = x.float()
    scores -= scores.amax(dim=-1, keepdim=True)  # exp never overflows
    scores.exp_()
    scores /= scores.sum(dim=-1, keepdim=True)
    y.copy_(scores)
