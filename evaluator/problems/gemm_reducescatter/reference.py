"""gemm_reducescatter inputs, reference (fp64) and baseline (cuBLAS + reduce_scatter_tensor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from evaluator.problems._multi import block, world_size
from evaluator.problems._sampling import tn_gemm_operands

if TYPE_CHECKING:
    from evaluator.harness.multi.rank_context import RankContext


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """The global operands: A (M, K) and B (N, K), bf16, as gemm_bf16 draws them."""
    a, b = tn_gemm_operands("gemm_reducescatter", axes, seed, device, distribution)
    return {"A": a.to(torch.bfloat16), "B": b.to(torch.bfloat16)}


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    """Rank r holds the K-columns r of A (the previous column-parallel layer's output) and of B."""
    w = world_size(axes)
    return {"A": block(global_inputs["A"], 1, rank, w), "B": block(global_inputs["B"], 1, rank, w)}


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    return {"C": global_inputs["A"].double() @ global_inputs["B"].double().t()}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"C": block(global_outputs["C"], 0, rank, world_size(axes))}  # its M/W rows


def baseline(ctx: RankContext, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    partial = torch.matmul(A, B.t())  # (M, N) bf16: this rank's share of every output
    dist.reduce_scatter_tensor(C.view(-1), partial.view(-1), op=dist.ReduceOp.SUM, group=ctx.group)
