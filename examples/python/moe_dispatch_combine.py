"""moe_dispatch_combine, the plain-torch way: gather every token, compute this rank's experts on all
of them, then reduce-scatter the fp32 partial outputs (Megatron-LM's all-gather token dispatcher).

kernel(ctx, x, topk_ids, topk_weights, W, y): x (T/W, H) bf16 are this rank's tokens, topk_ids and
topk_weights (T/W, K) their K experts (global ids) and gate weights, W (E/W, N, H) bf16 this rank's
experts (rank r owns experts r E/W .. (r+1) E/W - 1); y (T/W, N) bf16 receives the gated sum of each
token's expert outputs. ``ctx``: rank, world_size, group, device. Honest; expected to be slower than
the baseline on a GPU (not measured there): every rank receives all T tokens instead of those
routed to it, scans the whole routing once per local expert, runs one matmul per expert instead of a
grouped GEMM, and moves (T, N) fp32 partials in the reduce-scatter.
"""

import torch
import torch.distributed as dist


def _gather(ctx, tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's block of ``tensor``, in rank order (flat: gloo's form)."""
    out = torch.empty(ctx.world_size * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
    dist.all_gather_into_tensor(out, tensor.reshape(-1), group=ctx.group)
    return out.view(ctx.world_size * tensor.shape[0], *tensor.shape[1:])


def kernel(ctx, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, W: torch.Tensor,
           y: torch.Tensor) -> None:
    all_x, all_ids, all_gates = _gather(ctx, x), _gather(ctx, topk_ids), _gather(ctx, topk_weights)
    first = ctx.rank * W.shape[0]  # global id of this rank's first expert
    partial = torch.zeros((all_x.shape[0], W.shape[1]), dtype=torch.float32, device=x.device)
    for expert in range(W.shape[0]):
        tokens, slots = torch.nonzero(all_ids == first + expert, as_tuple=True)
        if tokens.numel():
            rows = torch.matmul(all_x[tokens], W[expert].t())  # bf16, fp32 accumulation
            partial.index_add_(0, tokens, rows.float() * all_gates[tokens, slots].unsqueeze(1))
    mine = torch.empty(y.shape, dtype=torch.float32, device=y.device)
    dist.reduce_scatter_tensor(mine.view(-1), partial.view(-1), group=ctx.group)  # every rank's experts
    y.copy_(mine)
