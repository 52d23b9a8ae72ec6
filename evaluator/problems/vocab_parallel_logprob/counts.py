"""Exact work of vocab_parallel_logprob: logprob[t] = logits[t, target[t]] - logsumexp(logits[t, :]) over
a vocabulary of V sharded across W ranks (rank r holds logits (T, V/W)), every rank receiving all T
log-probabilities.

- flops: fp32 SIMT, 4 per logit (max, subtract, exp, add) and 2 per token (log, subtract): 4TV + 2T
  in all (exp counted as 1, as everywhere in the catalogue).
- bytes (HBM, all ranks): every logit read once (bf16, 2TV), and on each of the W ranks the T targets
  read (int64) and the T log-probabilities written (fp32): 2TV + 12WT.
- comm_bytes (per GPU): 4T. Every rank's T outputs depend on the logits of every other rank, so each
  rank must receive at least T values (fp32: what the outputs are held to); what all ranks receive,
  some rank sent, so on average each GPU sends at least 4T bytes. Megatron's three all-reduces of T
  floats (max, sum of exponentials, target logit) send 3 x 2 (W-1)/W x 4T.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES, FP32_BYTES, INT64_BYTES = 2, 4, 8


def counts(axes: dict[str, int]) -> Counts:
    t, v, w = axes["T"], axes["V"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"fp32_simt": float(4 * t * v + 2 * t)},
        bytes=float(BF16_BYTES * t * v + w * t * (INT64_BYTES + FP32_BYTES)),
        comm_bytes=float(FP32_BYTES * t),
    )
