"""vocab_parallel_logprob inputs, reference (fp64) and baseline (Megatron's vocab-parallel log-softmax:
three all-reduces of T floats)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from evaluator.problems._logits import logits_and_targets, target_log_probabilities
from evaluator.problems._multi import block, world_size
from evaluator.problems._sampling import BASIC_DISTRIBUTIONS

if TYPE_CHECKING:
    from evaluator.harness.multi.rank_context import RankContext

#: ``confident``: the target's logit, far above the others (log-probabilities within ~1e-4 of 0).
CONFIDENT_LOGIT = 30.0


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """The global data: logits (T, V) bf16 and the target token of every row (T,) int64.

    normal, uniform, outliers: the basic samplers x LOGIT_SCALE (outliers reach +-500: exp overflows
    fp32 unless the row's maximum is subtracted). confident: normal, with every target's logit set to
    CONFIDENT_LOGIT, so log-probabilities are tiny negatives that only a careful fp32 path keeps."""
    sampler = "normal" if distribution == "confident" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"vocab_parallel_logprob has no distribution {distribution!r}")
    logits, target = logits_and_targets(axes, seed, device, distribution, sampler)
    if distribution == "confident":
        logits[torch.arange(axes["T"], device=device), target] = CONFIDENT_LOGIT
    return {"logits": logits.to(torch.bfloat16), "target": target}


def rank_inputs(
    global_inputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    """Rank r holds the vocabulary columns r of the logits and every row's target (a global token id)."""
    return {"logits": block(global_inputs["logits"], 1, rank, world_size(axes)),
            "target": global_inputs["target"].clone()}


def reference(global_inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """log_softmax in fp64 over the whole vocabulary, REFERENCE_ROWS rows at a time."""
    return {"logprob": target_log_probabilities(global_inputs["logits"], global_inputs["target"])}


def rank_outputs(
    global_outputs: dict[str, torch.Tensor], axes: dict[str, int], rank: int
) -> dict[str, torch.Tensor]:
    return {"logprob": global_outputs["logprob"]}  # every rank holds all T log-probabilities


def baseline(ctx: RankContext, logits: torch.Tensor, target: torch.Tensor, logprob: torch.Tensor) -> None:
    """As Megatron-LM's and NeMo's vocab-parallel cross-entropy: fp32, the rows' maximum, the sum of
    exponentials and the target's logit, each all-reduced across the vocabulary shards."""
    shard = logits.shape[1]
    first = ctx.rank * shard
    local = logits.float()
    row_max = local.amax(dim=1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=ctx.group)
    local.sub_(row_max.unsqueeze(1))
    mine = (target >= first) & (target < first + shard)
    picked = local.gather(1, (target - first).clamp(0, shard - 1).unsqueeze(1)).squeeze(1)
    target_logit = torch.where(mine, picked, torch.zeros_like(picked))
    dist.all_reduce(target_logit, group=ctx.group)
    sum_exp = local.exp_().sum(dim=1)
    dist.all_reduce(sum_exp, group=ctx.group)
    torch.sub(target_logit, sum_exp.log(), out=logprob)
