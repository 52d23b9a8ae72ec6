"""Example submission for rope: rotary embedding of q and k with plain torch ops in fp32.

Arguments: q (T,Hq,128), k (T,Hk,128) bf16, cos, sin (T,64) fp32, then the outputs q_out
(T,Hq,128), k_out (T,Hk,128) bf16. Each head's first half pairs with its second half (the NeoX /
Llama rotate_half convention): out = (x1 cos - x2 sin, x2 cos + x1 sin), computed in fp32 and
rounded to bf16 once, a half at a time into the output. One pass over q and k would do.
"""

from __future__ import annotations

from torch import Tensor


def rotate(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor) -> None:
    half = x.shape[-1] // 2
    first, second = x[..., :half].float(), x[..., half:].float()
    out[..., :half] = first * cos - second * sin
    out[..., half:] = second * cos + first * sin


def kernel(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, q_out: Tensor, k_out: Tensor) -> None:
    cos, sin = cos[:, None, :], sin[:, None, :]  # (T, 1, D/2): every head turns alike
    rotate(q, cos, sin, q_out)
    rotate(k, cos, sin, k_out)
