"""Exact work of gemm_reducescatter: rank r holds the K-shard r of A (M, K/W) and of B (N, K/W) and
receives rows r of C = A @ B^T = sum over ranks of A_s @ B_s^T, (M/W, N).

- flops: 2 M N K bf16 tensor-core flops in all (each rank its partial product, 2 M N K / W).
- bytes (HBM, all ranks): every shard read once, every output row written once: 2 (MK + NK + MN).
- comm_bytes (per GPU), the least of the two ways to get every row block of C:
  reduce-scatter the bf16 partial products ((W-1)/W x 2MN: each GPU sends the W - 1 row blocks of its
  partial that others own); or gather, for its own rows, the K-shards of A's rows and all of B that
  it lacks ((W-1)/W x 2 (MK/W + NK)). The first is smaller unless M is large against K; the bound
  takes the least.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES = 2


def comm_bytes(m: int, n: int, k: int, w: int) -> float:
    reduce_scatter_partials = (w - 1) / w * m * n
    gather_operands = (w - 1) / w * (m * k / w + n * k)
    return float(min(reduce_scatter_partials, gather_operands) * BF16_BYTES)


def counts(axes: dict[str, int]) -> Counts:
    m, n, k, w = axes["M"], axes["N"], axes["K"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"bf16_tensor": float(2 * m * n * k)},
        bytes=float((m * k + n * k + m * n) * BF16_BYTES),
        comm_bytes=comm_bytes(m, n, k, w),
    )
