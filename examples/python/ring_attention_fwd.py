"""ring_attention_fwd, the plain-torch way: gather every rank's keys and values, then one attention.

kernel(ctx, q, k, v, O, LSE): q, k, v (B, H, S/W, D) bf16 are this rank's chunk of the sequence;
O (B, H, S/W, D) bf16 and LSE (B, H, S/W) fp32 receive its queries' attention over all S keys.
``ctx``: rank, world_size, group, device. Honest and slower than the ring: nothing overlaps the
gather, and every rank holds all S keys and values at once.
"""

import torch
import torch.distributed as dist


def gather_sequence(ctx, chunk: torch.Tensor) -> torch.Tensor:
    """(B, H, S/W, D) chunks of every rank -> (B, H, S, D), in rank order along the sequence."""
    flat = torch.empty(ctx.world_size * chunk.numel(), dtype=chunk.dtype, device=chunk.device)
    dist.all_gather_into_tensor(flat, chunk.reshape(-1), group=ctx.group)  # flat: gloo's form
    b, h, s, d = chunk.shape
    return flat.view(ctx.world_size, b, h, s, d).permute(1, 2, 0, 3, 4).reshape(b, h, ctx.world_size * s, d)


def kernel(
    ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, LSE: torch.Tensor
) -> None:
    keys, values = gather_sequence(ctx, k), gather_sequence(ctx, v)
    if q.device.type == "cuda":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, keys, values, 0.0, False)[:2]
    else:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, keys, values, 0.0, False)[:2]
    o.copy_(out)
    LSE.copy_(lse)
