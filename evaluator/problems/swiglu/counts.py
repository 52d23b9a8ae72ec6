"""Exact work of swiglu.

Two GEMMs: 2 * (2*T*F*D) bf16 tensor flops. Per output element, fp32 SIMT: sigmoid as
exp (1, a special function counts as 1), add 1 (1), reciprocal (1); h * sigmoid (1); times h3
(1): 5. Bytes: x, W1, W3 read once, out written once; the (T, F) intermediates need never reach
memory, so they are not counted.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    t, d, f = axes["T"], axes["D"], axes["F"]
    return Counts(
        flops={"bf16_tensor": float(4 * t * f * d), "fp32_simt": float(5 * t * f)},
        bytes=float((t * d + 2 * f * d + t * f) * BF16_BYTES),
    )
