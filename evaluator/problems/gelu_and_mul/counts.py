"""Exact work of gelu_and_mul, in fp32 SIMT flops.

Per output element, the tanh form 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))): g^3 (2
multiplies), 0.044715 g^3 (1), + g (1), x sqrt(2/pi) (1), tanh (1, a special function counts as
1), + 1 (1), x 0.5 g (2: 0.5 g and the product), x up (1): 10TI. Folding constants differently
(g (c1 + c2 g^2)) saves one; the count is of the formula as written. Bytes: x (T, 2I) read once,
y (T, I) written once, bf16: 2(2TI + TI).
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    t, i = axes["T"], axes["I"]
    return Counts(flops={"fp32_simt": float(10 * t * i)}, bytes=float(3 * t * i * BF16_BYTES))
