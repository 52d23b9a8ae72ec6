"""Exact work of attention_fwd.

Tensor flops (bf16): two GEMMs per computed (query, key) pair, each 2*D: 4*D per pair, times
B*H. A pair is computed when unmasked: S*S pairs, or S*(S+1)/2 under the causal mask (the lower
triangle including the diagonal, as SOL-ExecBench counts it). So non-causal 4*B*H*S*S*D and
causal 2*B*H*S*(S+1)*D. The softmax (max, exp, sum per score) runs on other units alongside the
GEMMs (FlashAttention-3 overlaps them) and is not counted, as the usual attention TFLOP/s does not.
Bytes: q, k, v read once, O (bf16) and LSE (fp32) written once.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP32_BYTES = 2, 4


def pairs(seq: int, causal: int) -> int:
    """(query, key) pairs that are computed: S*S, or S*(S+1)/2 under a causal mask."""
    return seq * (seq + 1) // 2 if causal else seq * seq


def counts(axes: dict[str, int]) -> Counts:
    b, h, s, d = axes["B"], axes["H"], axes["S"], axes["D"]
    return Counts(
        flops={"bf16_tensor": float(4 * b * h * d * pairs(s, axes["causal"]))},
        bytes=float(4 * b * h * s * d * BF16_BYTES + b * h * s * FP32_BYTES),
    )
