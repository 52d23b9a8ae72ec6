"""Exact work of gemv_bf16: gemm_bf16's with M = B. 2*B*N*K tensor-core flops; read x and W once,
write y once: 2*(B*K + N*K + B*N) bytes. Reading W (2*N*K bytes) dominates: at B <= 16 the problem
is memory-bound."""

from __future__ import annotations

from evaluator.problems import Counts
from evaluator.problems.gemm_bf16.counts import counts as gemm_counts


def counts(axes: dict[str, int]) -> Counts:
    return gemm_counts({"M": axes["B"], "N": axes["N"], "K": axes["K"]})
