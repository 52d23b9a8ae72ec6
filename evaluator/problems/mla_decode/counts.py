"""Exact work of mla_decode (absorbed multi-head latent attention, one query token per sequence).

flops: for each of the T cached tokens of the batch and each of the H heads, a 576-long dot product
(the score) and a 512-wide accumulation of the latent value: 2 H T (576 + 512) bf16 tensor
operations (the softmax's exp, max and sum are not counted, as in attention_fwd).
bytes: q (B, H, 576) read, only the T cached tokens' 576 latent values read (the cache's unused
slots need not be), seq_lens read, out (B, H, 512) written; bf16 but seq_lens (int32).
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, INT32_BYTES = 2, 4
#: The absorbed latent: 512 values of c_kv (also the value) and 64 of the decoupled RoPE key.
LATENT, ROPE = 512, 64
QK_DIM = LATENT + ROPE


def counts(axes: dict[str, int]) -> Counts:
    b, h, t = axes["B"], axes["H"], axes["T"]
    return Counts(
        flops={"bf16_tensor": float(2 * h * t * (QK_DIM + LATENT))},
        bytes=float((b * h * QK_DIM + t * QK_DIM + b * h * LATENT) * BF16_BYTES + b * INT32_BYTES),
    )
