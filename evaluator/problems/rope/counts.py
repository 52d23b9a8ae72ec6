"""Exact work of rope, in fp32 SIMT flops.

Per output element: x * cos, the partner (rotate_half) element * sin and their sum or difference
(3; rotate_half's negation folds into the subtraction). The tables are inputs, so no cos or sin is
evaluated. Bytes: q and k read once, q_out and k_out written once (bf16), cos and sin read once
(fp32, D/2 per token, shared by every head).
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2
FP32_BYTES = 4
HEAD_DIM = 128


def counts(axes: dict[str, int]) -> Counts:
    t, heads = axes["T"], axes["Hq"] + axes["Hk"]
    elements = t * heads * HEAD_DIM
    return Counts(
        flops={"fp32_simt": float(3 * elements)},
        bytes=float(2 * elements * BF16_BYTES + 2 * t * (HEAD_DIM // 2) * FP32_BYTES),
    )
