"""Example submission for fp8_quant_per_block: x (T,H) bf16 -> q (T,H) float8_e4m3fn and scales
(T,H/128) fp32, one scale per group of 128 consecutive values of a row.

Plain torch in fp32 on a (T, H/128, 128) view: each group's amax (floored at 1e-4), scales = amax /
448 written out, and q = x times 448 / amax (a multiplication by the reciprocal instead of a division
by the scale; the tolerance allows the fp32 rounding in between), cast to e4m3 (round to nearest
even). Three passes over x and an fp32 copy where one pass would do.
"""

from __future__ import annotations

import torch

FP8_MAX = 448.0
EPS = 1e-4
GROUP = 128


def kernel(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    t, h = x.shape
    groups = x.float().view(t, h // GROUP, GROUP)
    amax = groups.abs().amax(dim=-1, keepdim=True).clamp_min(EPS)
    scales.copy_((amax / FP8_MAX).squeeze(-1))
    q.view(t, h // GROUP, GROUP).copy_(groups.mul_(FP8_MAX / amax))
