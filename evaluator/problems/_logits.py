"""What the language-model-head problems share (cross_entropy, vocab_parallel_logprob): logits of a
model's head and one target token per row, and the target's log-probability in fp64."""

from __future__ import annotations

import torch

from evaluator.problems._sampling import draw, generator

#: Logits of a language model's head have a standard deviation of a few units: softmax is peaked.
LOGIT_SCALE = 4.0
#: Rows of the fp64 reference at a time (V = 151936: 1.2 GB per 1024 rows).
REFERENCE_ROWS = 1024


def logits_and_targets(
    axes: dict[str, int],
    seed: int,
    device: str | torch.device,
    distribution: str,
    sampler: str,
    scale: float = LOGIT_SCALE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (T, V) fp32 of ``sampler`` x ``scale`` (the caller rounds them to bf16 when it is done)
    and one target token per row (T,) int64, uniform over [0, V)."""
    t, v = axes["T"], axes["V"]
    logits = draw("logits", (t, v), axes, seed, device, distribution, sampler).mul_(scale)
    target = torch.randint(
        0,
        v,
        (t,),
        generator=generator(device, seed, distribution, axes, "target"),
        device=device,
        dtype=torch.int64,
    )
    return logits, target


def target_log_probabilities(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """log_softmax(row)[target] in fp64 from the exact bf16 logits, REFERENCE_ROWS rows at a time."""
    out = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    for start in range(0, logits.shape[0], REFERENCE_ROWS):
        rows = logits[start : start + REFERENCE_ROWS].double()
        picked = rows.gather(1, target[start : start + REFERENCE_ROWS, None]).squeeze(1)
        out[start : start + REFERENCE_ROWS] = picked - torch.logsumexp(rows, dim=1)
        del rows
    return out
