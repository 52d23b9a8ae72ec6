"""Example submission for gemm_fp8: C = (A * scale_a) @ (B * scale_b)^T, e4m3 in, bf16 out.

Arguments in declared order: A (M,K) e4m3, B (N,K) e4m3, scale_a (1,) fp32, scale_b (1,) fp32,
then the output C (M,N) bf16. cuBLASLt wants the second operand column-major, which B.t() is.
"""

from __future__ import annotations

import torch


def kernel(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    torch._scaled_mm(A, B.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, out=C)
