"""Exact work of paged_decode_attention.

Tensor flops (bf16): as attention_fwd, two products of length D per (query head, key): 4*D per
pair. Every sequence's one query attends to all its seq_lens[b] keys, so the pairs are Hq * T,
T = sum(seq_lens) (an axis: the generated lengths always sum to it), and flops = 4*Hq*D*T. The
query heads of one KV head share its keys (GQA), which is what lets a kernel run them as one
small GEMM on the tensor cores. The softmax is not counted (as attention_fwd).
Bytes: the K and V of the T cached tokens (Hkv*D bf16 each), read once; q and out (bf16); the
whole block table and seq_lens (int32). The cache's other blocks and the unused slots of each
sequence's last block need not be read, so bytes are less than the declared tensors.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, INT32_BYTES = 2, 4
HEAD_DIM = 128
#: Tokens per page of the KV cache.
BLOCK_SIZE = 16


def counts(axes: dict[str, int]) -> Counts:
    b, hq, hkv, s, t = axes["B"], axes["Hq"], axes["Hkv"], axes["S"], axes["T"]
    return Counts(
        flops={"bf16_tensor": float(4 * hq * HEAD_DIM * t)},
        bytes=float(
            (2 * t * hkv * HEAD_DIM + 2 * b * hq * HEAD_DIM) * BF16_BYTES
            + (b * (s // BLOCK_SIZE) + b) * INT32_BYTES
        ),
    )
