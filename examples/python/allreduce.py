"""allreduce, the plain-torch way: gather every rank's values, then sum them in fp32 on each rank.

kernel(ctx, x, y): x (N,) bf16 is this rank's contribution, y (N,) bf16 receives the sum over all
ranks. ``ctx`` is the harness's RankContext: rank, world_size, group (the job's process group),
device. Honest and slower than the baseline: it moves (W - 1) x N values into every rank instead
of the 2 (W - 1) / W x N of a ring, but sums in fp32 and rounds once, so it is the more precise.
"""

import torch
import torch.distributed as dist


def kernel(ctx, x: torch.Tensor, y: torch.Tensor) -> None:
    gathered = torch.empty(ctx.world_size * x.numel(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x, group=ctx.group)  # flat: gloo wants (W * N,)
    y.copy_(gathered.view(ctx.world_size, -1).float().sum(dim=0))
