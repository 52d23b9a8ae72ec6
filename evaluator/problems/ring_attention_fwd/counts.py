"""Exact work of ring_attention_fwd: non-causal attention over a sequence of S tokens split in W
contiguous chunks, rank r holding the queries, keys and values of chunk r and receiving O and LSE
of its queries over all S keys.

- flops: as attention_fwd, non-causal: 4 B H S^2 D bf16 tensor-core flops in all.
- bytes (HBM, all ranks): q, k, v read once and O written once (bf16), LSE written once (fp32):
  8 B H S D + 4 B H S. A key/value chunk received from a peer may be consumed as it arrives.
- comm_bytes (per GPU): (W-1)/W x 4 B H S D: every rank needs the keys and values of the W - 1
  chunks it lacks (bf16; a ring passes them on). Sending the queries to the keys instead and the
  partial outputs back costs (W-1)/W x B H S (4D + 4) bytes, more: the bound takes the ring's.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES, FP32_BYTES = 2, 4


def counts(axes: dict[str, int]) -> Counts:
    b, h, s, d, w = axes["B"], axes["H"], axes["S"], axes["D"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"bf16_tensor": float(4 * b * h * s * s * d)},
        bytes=float(4 * b * h * s * d * BF16_BYTES + b * h * s * FP32_BYTES),
        comm_bytes=(w - 1) / w * 2 * b * h * s * d * BF16_BYTES,
    )
