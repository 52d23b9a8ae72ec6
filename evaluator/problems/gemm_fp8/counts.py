"""Exact work of gemm_fp8: 2*M*N*K fp8 tensor flops; read A, B (1 byte each) and the two fp32
scales once, write C (bf16) once. Applying the scales (one multiply per output) is not counted:
it folds into the epilogue and is M*N flops against 2*M*N*K."""

from __future__ import annotations

from evaluator.problems import Counts

FP8_BYTES, BF16_BYTES, FP32_BYTES = 1, 2, 4


def counts(axes: dict[str, int]) -> Counts:
    m, n, k = axes["M"], axes["N"], axes["K"]
    return Counts(
        flops={"fp8_tensor": float(2 * m * n * k)},
        bytes=float((m * k + n * k) * FP8_BYTES + m * n * BF16_BYTES + 2 * FP32_BYTES),
    )
