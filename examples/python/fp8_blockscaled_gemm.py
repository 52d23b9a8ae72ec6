"""Example submission for fp8_blockscaled_gemm: C = (A * scale_a) @ (B * scale_b)^T with DeepSeek-V3
block scales. A (M,K), B (N,K) e4m3; scale_a (M,K/128) fp32, one per token and 128-wide K block;
scale_b (N/128,K/128) fp32, one per 128x128 weight block; C (M,N) bf16.

Dequantise both operands to fp16 with broadcast views (every block times its scale in fp32,
rounded once to fp16's 11 bits), then one fp16 GEMM with fp32 accumulation. Honest and slower than
an fp8 kernel: the fp16 operands go through memory (2 bytes a value against 1) and the tensor
cores run at the fp16 rate, half the fp8 one.
"""

from __future__ import annotations

import torch

BLOCK = 128


def kernel(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    m, k = A.shape
    n = B.shape[0]
    a = (A.view(m, k // BLOCK, BLOCK).float() * scale_a[:, :, None]).to(torch.float16)
    b = B.view(n // BLOCK, BLOCK, k // BLOCK, BLOCK).float() * scale_b[:, None, :, None]
    C.copy_(a.view(m, k) @ b.to(torch.float16).view(n, k).t())
