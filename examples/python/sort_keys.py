"""Example submission for sort_keys: each row of x (R, N) int32 in ascending order into y.

A least-significant-digit radix sort written with torch operations: the keys shifted to unsigned
order (x + 2^31, so negative keys come first), then four passes over 8-bit digits, each a stable
sort of the rows by one digit. Correct because every pass is stable; slow because each pass is a
whole torch sort with its index arrays, where a radix sort kernel makes one histogram, one scan and
one scatter per digit.
"""

from __future__ import annotations

import torch

DIGIT_BITS = 8
SIGN_FLIP = 2**31


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    keys = x.long() + SIGN_FLIP  # [0, 2^32): unsigned order is the signed order
    for shift in range(0, 32, DIGIT_BITS):
        digits = (keys >> shift) & ((1 << DIGIT_BITS) - 1)
        order = torch.sort(digits, dim=-1, stable=True).indices
        keys = keys.gather(-1, order)
    y.copy_(keys - SIGN_FLIP)
