"""cross_entropy inputs, reference (fp64) and baseline (F.cross_entropy on fp32 logits)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evaluator.problems._logits import LOGIT_SCALE, logits_and_targets, target_log_probabilities
from evaluator.problems._sampling import BASIC_DISTRIBUTIONS

#: ``large``: logits of 30 * N(0,1), up to ~150: exp overflows fp32 unless the row maximum goes first.
LARGE_SCALE = 30.0


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """logits (T, V) bf16 and one target token per row (T,) int64, uniform over [0, V).

    normal, uniform, outliers: the basic samplers x LOGIT_SCALE (outliers reach +-500 and overflow
    fp32 exp unless each row's maximum is subtracted). large: 30 * N(0,1), every row past exp's range."""
    sampler = "normal" if distribution == "large" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"cross_entropy has no distribution {distribution!r}")
    scale = LARGE_SCALE if distribution == "large" else LOGIT_SCALE
    logits, target = logits_and_targets(axes, seed, device, distribution, sampler, scale)
    return {"logits": logits.to(torch.bfloat16), "target": target}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """logsumexp(row) - row[target] in fp64 from the exact bf16 logits, REFERENCE_ROWS rows at a time."""
    return {"loss": -target_log_probabilities(inputs["logits"], inputs["target"])}


def baseline(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    """F.cross_entropy on an fp32 copy of the logits (what Hugging Face's loss does: logits.float()).
    On the bf16 logits themselves F.cross_entropy is faster but returns bf16 losses: its log_softmax
    rounds every log-probability to bf16 (up to 2^-8 of it: 0.05 on a loss of 12) before the target's
    is picked, which the problem's fp32 tolerance rejects, so it is not an honest baseline."""
    loss.copy_(F.cross_entropy(logits.float(), target, reduction="none"))
