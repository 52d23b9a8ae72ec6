"""Exact work of allgather_gemm: C_r = A @ B_r^T on every rank r, A (M, K) gathered from W row shards,
B_r (N/W, K) rank r's rows of the weight.

- flops: 2 M N K bf16 tensor-core flops in all (each rank 2 M (N/W) K).
- bytes (HBM, all ranks): each rank reads its shard of A, its B_r and writes its C_r once:
  2 (MK + NK + MN) in all. The gathered rows of A may stream from the peers' memory straight into
  the GEMM, so they are not counted twice.
- comm_bytes (per GPU), the least of the two ways to get every C_r:
  gather A (each GPU receives the W - 1 shards it lacks, and sends as much): (W-1)/W x 2MK;
  or send each B_r to the ranks holding the rows and the products back: (W-1)/W x 2NK + (W-1) x 2 (M/W)(N/W).
  The first is smaller for every ranked shape (M <= 16384); the bound takes the least.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES = 2


def comm_bytes(m: int, n: int, k: int, w: int) -> float:
    gather_a = (w - 1) / w * m * k
    send_weights_and_products = (w - 1) / w * n * k + (w - 1) * (m // w) * (n // w)
    return float(min(gather_a, send_weights_and_products) * BF16_BYTES)


def counts(axes: dict[str, int]) -> Counts:
    m, n, k, w = axes["M"], axes["N"], axes["K"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"bf16_tensor": float(2 * m * n * k)},
        bytes=float((m * k + n * k + m * n) * BF16_BYTES),
        comm_bytes=comm_bytes(m, n, k, w),
    )
