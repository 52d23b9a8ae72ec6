"""Exact work of attention_bwd.

Tensor flops (bf16): five GEMMs per computed (query, key) pair, each 2*D: the recomputed scores
S = q k^T, dV = P^T dO, dP = dO V^T, dQ = dS K and dK = dS^T Q. So 10*D per pair, times B*H:
non-causal 10*B*H*S*S*D, causal 5*B*H*S*(S+1)*D (pairs as in attention_fwd), 2.5 times the
forward. Elementwise work (exp, the dS product) is not counted, as for the forward.
Bytes: q, k, v, o, dO (bf16) and lse (fp32) read once; dq, dk, dv (bf16) written once.
"""

from __future__ import annotations

from evaluator.problems import Counts
from evaluator.problems.attention_fwd.counts import pairs

BF16_BYTES, FP32_BYTES = 2, 4


def counts(axes: dict[str, int]) -> Counts:
    b, h, s, d = axes["B"], axes["H"], axes["S"], axes["D"]
    return Counts(
        flops={"bf16_tensor": float(10 * b * h * d * pairs(s, axes["causal"]))},
        bytes=float(8 * b * h * s * d * BF16_BYTES + b * h * s * FP32_BYTES),
    )
