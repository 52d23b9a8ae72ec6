"""Example submission for w4a16_gemm: y = x @ dequant(W)^T, x (M,K) bf16, qweight (N,K/8) int32,
scales (N,K/128) bf16, y (M,N) bf16.

Dequantise, then one bf16 GEMM: every int32 word is shifted by 0, 4, ..., 28 bits at once (the
nibble in bits 4j..4j+3 of word i is column 8i + j), masked to 0..15, centred on the zero point 8
and multiplied by its group's scale, all in one broadcast per step; then torch.matmul (fp32
accumulation inside cuBLAS). Honest and slower than a fused kernel: the bf16 weights go through
memory, 4x the packed bytes, and the int32 temporaries 8x more.
"""

from __future__ import annotations

import torch

GROUP = 128


def kernel(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> None:
    n, words = qweight.shape
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=qweight.device)
    nibbles = (qweight[..., None] >> shifts) & 0xF  # (N, K/8, 8): the mask drops sign extension
    w = (nibbles.view(n, -1, GROUP) - 8).to(torch.bfloat16) * scales[..., None]
    torch.matmul(x, w.view(n, words * 8).t(), out=y)
