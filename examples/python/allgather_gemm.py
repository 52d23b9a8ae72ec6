"""allgather_gemm, the plain-torch way: gather every rank's rows of A, then one GEMM per shard.

kernel(ctx, A, B, C): A (M/W, K) bf16 is this rank's rows of the activations, B (N/W, K) bf16 its
rows of the weight (its output features), C (M, N/W) bf16 receives all of A times B^T. ``ctx``:
rank, world_size, group (the job's process group), device. Honest and slower than the baseline: the
gather into separate tensors and W smaller GEMMs instead of one, and nothing overlapped.
"""

import torch
import torch.distributed as dist


def kernel(ctx, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    shards = [torch.empty_like(A) for _ in range(ctx.world_size)]
    dist.all_gather(shards, A, group=ctx.group)
    rows = A.shape[0]
    for rank, shard in enumerate(shards):  # rank r's rows of A give rows r of C
        torch.matmul(shard, B.t(), out=C[rank * rows:(rank + 1) * rows])
