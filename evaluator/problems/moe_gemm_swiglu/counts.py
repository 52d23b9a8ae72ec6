"""Exact work of moe_gemm_swiglu.

Every token meets one expert: its gate and up projections are 2 * (2 T I K) bf16 tensor flops
whatever the group sizes; per output element 5 fp32 SIMT operations (silu as swiglu counts it:
exp, add 1, reciprocal, times the gate; times the up projection). Bytes: X, the offsets and Y
once, and the weights of the NON-EMPTY experts only (grouped_gemm_bf16's rule); the (T, 2I)
projections need never reach memory.
"""

from __future__ import annotations

from evaluator.problems import Counts
from evaluator.problems.grouped_gemm_bf16.counts import empty_groups

BF16_BYTES, INT32_BYTES = 2, 4


def counts(axes: dict[str, int]) -> Counts:
    t, g, i, k = axes["T"], axes["G"], axes["I"], axes["K"]
    used = g - empty_groups(g)
    return Counts(
        flops={"bf16_tensor": float(4 * t * i * k), "fp32_simt": float(5 * t * i)},
        bytes=float((t * k + used * 2 * i * k + t * i) * BF16_BYTES + (g + 1) * INT32_BYTES),
    )
