"""vocab_parallel_logprob, the plain-torch way: gather every rank's logits, then log_softmax locally.

kernel(ctx, logits, target, logprob): logits (T, V/W) bf16 are this rank's vocabulary columns,
target (T,) int64 the global token ids, logprob (T,) fp32 receives log_softmax(all logits)[t, target[t]].
``ctx``: rank, world_size, group, device. Honest and far slower than the baseline: it moves (W - 1)
shards of T x V/W logits into every rank, where three all-reduces of T floats would do.
"""

import torch
import torch.distributed as dist


def kernel(ctx, logits: torch.Tensor, target: torch.Tensor, logprob: torch.Tensor) -> None:
    gathered = torch.empty(ctx.world_size * logits.numel(), dtype=logits.dtype, device=logits.device)
    dist.all_gather_into_tensor(gathered, logits.reshape(-1), group=ctx.group)  # flat: gloo's form
    rows, shard = logits.shape
    full = gathered.view(ctx.world_size, rows, shard).permute(1, 0, 2).reshape(rows, -1)  # (T, V)
    logprob.copy_(torch.log_softmax(full.float(), dim=1).gather(1, target.unsqueeze(1)).squeeze(1))
