"""ring_attention_fwd inputs, reference (fp64, chunked) and baseline (ring attention: the key/value
chunks passed round the ring with batch_isend_irecv, each step's flash attention merged by its LSE)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from evaluator.problems import _attention
from evaluator.problems._multi import block, world_size

if TYPE_CHECKING:
    from evaluator.harness.multi.rank_context import RankContext

SEQUENCE_DIM = 2


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """The whole sequence's q, k, v (B, H, S, D) bf16, drawn as attention_fwd draws them."""
    return _attention.draw_qkv(axes, seed, device, distribution, ("q", "k", "v"))


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    """Rank r holds the contiguous chunk r of the sequence: its queries, keys and values."""
    return {
        name: block(global_inputs[name], SEQUENCE_DIM, rank, world_size(axes)) for name in ("q", "k", "v")
    }


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    out, lse = _attention.forward(
        global_inputs["q"], global_inputs["k"], global_inputs["v"], {**axes, "causal": 0}
    )
    return {"O": out, "LSE": lse}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    w = world_size(axes)
    return {
        "O": block(global_outputs["O"], SEQUENCE_DIM, rank, w),
        "LSE": block(global_outputs["LSE"], 2, rank, w),
    }


def flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(O bf16, LSE fp32) of q against one key/value chunk: SDPA's flash backend, which returns LSE."""
    if q.device.type == "cuda":
        result = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False)
    else:
        result = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)
    return result[0], result[1]


def baseline(ctx: RankContext, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
             LSE: torch.Tensor) -> None:
    """Ring attention with SDPA's flash forward per chunk (``ring``)."""
    ring(ctx, q, k, v, o, LSE, flash_forward)


def ring(
    ctx: RankContext,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    LSE: torch.Tensor,
    attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> None:
    """Ring attention: W steps; at each, ``attend`` (O bf16, LSE fp32 of q against one chunk) to the
    key/value chunk held now while the next one arrives from the previous rank, and merge the
    partial outputs by their log-sum-exp in fp32 (benchmarks/multigpu_baseline_audit.py passes
    other ``attend`` functions)."""
    ahead, behind = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    kv = torch.stack([k, v])
    out = torch.zeros(o.shape, dtype=torch.float32, device=o.device)
    lse = torch.full(LSE.shape, float("-inf"), dtype=torch.float32, device=LSE.device)
    for step in range(ctx.world_size):
        pending = []
        if step < ctx.world_size - 1:
            arriving = torch.empty_like(kv)
            pending = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, ahead, ctx.group),
                                              dist.P2POp(dist.irecv, arriving, behind, ctx.group)])
        step_out, step_lse = attend(q, kv[0], kv[1])
        merged = torch.logaddexp(lse, step_lse)
        out = out * torch.exp(lse - merged).unsqueeze(-1) + step_out.float() * torch.exp(
            step_lse - merged
        ).unsqueeze(-1)
        lse = merged
        for request in pending:
            request.wait()
        if pending:
            kv = arriving
    o.copy_(out)
    LSE.copy_(lse)
