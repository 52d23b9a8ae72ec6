"""allgather_gemm inputs, reference (fp64) and baseline (all_gather_into_tensor + cuBLAS)."""

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
    """The global operands: A (M, K) and the whole weight B (N, K), bf16, as gemm_bf16 draws them."""
    a, b = tn_gemm_operands("allgather_gemm", axes, seed, device, distribution)
    return {"A": a.to(torch.bfloat16), "B": b.to(torch.bfloat16)}


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    """Rank r holds rows r of A (sequence-parallel activations) and rows r of B (its output columns)."""
    w = world_size(axes)
    return {"A": block(global_inputs["A"], 0, rank, w), "B": block(global_inputs["B"], 0, rank, w)}


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    return {"C": global_inputs["A"].double() @ global_inputs["B"].double().t()}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"C": block(global_outputs["C"], 1, rank, world_size(axes))}  # its N/W output columns


def baseline(ctx: RankContext, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    gathered = torch.empty(ctx.world_size * A.numel(), dtype=A.dtype, device=A.device)
    dist.all_gather_into_tensor(gathered, A.view(-1), group=ctx.group)  # flat (gloo's form), rank order
    torch.matmul(gathered.view(-1, A.shape[1]), B.t(), out=C)
