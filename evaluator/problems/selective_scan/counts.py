"""Exact work of selective_scan, counted for the chunked (SSD) algorithm of Mamba-2 with chunks of
Q = 256 tokens, as mamba_chunk_scan_combined runs it: the sequence is cut into c = ceil(L/Q)
chunks of q_i tokens (the last may be short), and per batch element

- bf16 tensor flops (the GEMM-shaped work; the inputs are bf16):
  CB = C_l . B_s within each chunk for s <= l, per group: 2*N*pairs, pairs = sum q_i(q_i+1)/2;
  the intra-chunk output Y_diag = (CB * decay) @ (dt x), per head: 2*P*pairs;
  the chunk states B^T (decay dt x), per head, for chunks 0..c-2 (the last chunk's state is not
  an output): 2*P*N*(L - q_last);
  the inter-chunk output C @ state, per head, for chunks 1..c-1 (the first chunk starts from the
  zero state): 2*P*N*(L - q_0).
- fp32 SIMT flops, per head: dt*A per token (L) and its running sum inside each chunk (L - c);
  per (l, s) pair the decay exp(acum_l - acum_s) (a subtraction and an exp) and its two products
  with CB and dt_s (4*pairs); per token of chunks 0..c-2 the state weight exp(acum_last -
  acum_s) * dt_s (3) and its product with x_s (P); per token of chunks 1..c-1 the factor
  exp(acum_l) (1), its product with C @ state (P) and the sum Y_diag + Y_off (P); and the state
  passing S_i = exp(chunk sum) S_(i-1) + new_i for chunks 1..c-2 (one exp, 2*P*N each).
Bytes: x, dt, A, Bm, Cm read once and y written once. The chunk states (c*H*P*N fp32 per batch
element) are not counted: a kernel that keeps them on chip need not write them.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, FP32_BYTES = 2, 4
#: Tokens per chunk of the counted algorithm (Mamba-2's chunk_size).
CHUNK = 256


def chunk_lengths(length: int) -> list[int]:
    return [min(CHUNK, length - start) for start in range(0, length, CHUNK)]


def counts(axes: dict[str, int]) -> Counts:
    b, seq, h, p, g, n = (axes[name] for name in ("B", "L", "H", "P", "G", "N"))
    lengths = chunk_lengths(seq)
    chunks = len(lengths)
    pairs = sum(q * (q + 1) // 2 for q in lengths)
    feeding = seq - lengths[-1]  # tokens of chunks 0..c-2: their states are needed
    fed = seq - lengths[0]  # tokens of chunks 1..c-1: they read a state
    tensor = b * (g * 2 * n * pairs + h * (2 * p * pairs + 2 * p * n * feeding + 2 * p * n * fed))
    passing = max(chunks - 2, 0) * (1 + 2 * p * n)
    simt = b * h * (seq + (seq - chunks) + 4 * pairs + (3 + p) * feeding + (1 + 2 * p) * fed + passing)
    return Counts(
        flops={"bf16_tensor": float(tensor), "fp32_simt": float(simt)},
        bytes=float(
            (2 * b * seq * h * p + 2 * b * seq * g * n) * BF16_BYTES + (b * seq * h + h) * FP32_BYTES
        ),
    )
