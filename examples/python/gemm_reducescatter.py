"""gemm_reducescatter, the plain-torch way: an fp32 partial product, reduce-scattered in fp32.

kernel(ctx, A, B, C): A (M, K/W) and B (N, K/W) bf16 are this rank's K-columns; C (M/W, N) bf16
receives rows r of the sum over ranks of A_s @ B_s^T. ``ctx``: rank, world_size, group, device.
Honest and slower than the baseline: it moves fp32 partials (twice the bytes of bf16) so that the
sum is rounded once, which makes it the more precise.
"""

import torch
import torch.distributed as dist


def kernel(ctx, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    partial = torch.matmul(A.float(), B.float().t())  # (M, N): this rank's share of every output
    rows = torch.empty(C.shape, dtype=torch.float32, device=C.device)
    dist.reduce_scatter_tensor(rows.view(-1), partial.view(-1), group=ctx.group)  # flat: gloo's form
    C.copy_(rows)
