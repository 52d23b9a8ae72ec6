"""Exact work of fp8_blockscaled_gemm.

Tensor flops: 2*M*N*K fp8 (e4m3 products on the tensor cores). fp32 SIMT flops: every output
folds in one partial sum per 128-wide K block, scaled by its two block scales: one fused
multiply-add (2 flops) per output and K block, 2*M*N*(K/128), as DeepGEMM promotes its tensor-core
partial sums into fp32 registers (the product of the two scales is shared by a tile's columns and
not counted). Bytes: A and B (1 byte each), their fp32 scales and C (bf16), each once.
"""

from __future__ import annotations

from evaluator.problems import Counts

FP8_BYTES, BF16_BYTES, FP32_BYTES = 1, 2, 4
#: The quantisation block along K (both operands) and along N (the weight).
BLOCK = 128


def counts(axes: dict[str, int]) -> Counts:
    m, n, k = axes["M"], axes["N"], axes["K"]
    blocks = k // BLOCK
    scales = m * blocks + (n // BLOCK) * blocks
    return Counts(
        flops={"fp8_tensor": float(2 * m * n * k), "fp32_simt": float(2 * m * n * blocks)},
        bytes=float((m * k + n * k) * FP8_BYTES + m * n * BF16_BYTES + scales * FP32_BYTES),
    )
