"""Exact work of silu_and_mul, in fp32 SIMT flops.

Per output element, as swiglu's gate: the sigmoid as exp (1, a special function counts as 1), add 1
(1) and reciprocal (1), its product with the gate (1) and with the up value (1): 5TI. Bytes: x
(T, 2I) read once, y (T, I) written once, bf16: 2(2TI + TI).
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    t, i = axes["T"], axes["I"]
    return Counts(flops={"fp32_simt": float(5 * t * i)}, bytes=float(3 * t * i * BF16_BYTES))
