"""Example submission for gemv_bf16: y = x @ W^T (x (B,K), W (N,K), y (B,N), all bf16).

A split-K GEMV in torch: K is cut into SPLITS slices (as a GEMV kernel's thread blocks would split
it), every slice's products are summed in fp32 by one batched matmul, the SPLITS partial sums are
added and y is rounded to bf16 once at the end. Honest and slower than the baseline: W is copied to
fp32 first. A handful of launches per call, whatever K is (a loop over K tiles launched hundreds:
on the H200 the timing witness costs about 11 ms per kernel it measures).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SPLITS = 4


def kernel(x: torch.Tensor, W: torch.Tensor, y: torch.Tensor) -> None:
    b, k = x.shape
    n = W.shape[0]
    pad = (-k) % SPLITS  # zero columns add nothing to the sums
    xs = F.pad(x, (0, pad)).float().view(b, SPLITS, -1).transpose(0, 1)  # (S, B, K/S)
    ws = F.pad(W, (0, pad)).float().view(n, SPLITS, -1).transpose(0, 1)  # (S, N, K/S)
    y.copy_(torch.bmm(xs, ws.transpose(1, 2)).sum(0))
