"""Example submission for layernorm: two-pass LayerNorm with plain torch ops in fp32.

Arguments: x (T,H), weight (H,), bias (H,) bf16, then the output y (T,H) bf16. The row mean, the
biased variance of the centred row and the affine step are computed in fp32 and y is rounded to
bf16 once. Several kernels and fp32 temporaries where one pass over x would do: fusing them is the
point of the problem.
"""

from __future__ import annotations

import torch

EPS = 1e-5


def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> None:
    centred = x.float()
    centred -= centred.mean(dim=-1, keepdim=True)
    inv_std = torch.rsqrt(centred.square().mean(dim=-1, keepdim=True) + EPS)
    y.copy_(centred * inv_std * weight.float() + bias.float())
