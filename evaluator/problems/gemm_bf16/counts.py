"""Exact work of gemm_bf16: 2*M*N*K tensor-core flops; read A and B once, write C once."""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    m, n, k = axes["M"], axes["N"], axes["K"]
    return Counts(
        flops={"bf16_tensor": float(2 * m * n * k)},
        bytes=float((m * k + n * k + m * n) * BF16_BYTES),
    )
