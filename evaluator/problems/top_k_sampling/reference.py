"""top_k_sampling inputs, reference (fp64) and baseline (torch.topk, softmax of the kept, a sort back
into vocabulary order, cumsum, search).

The contract: per row, the candidates are the top_k[row] largest logits; their probabilities are
renormalised to sum to 1 (a softmax over their logits alone); the token is the first candidate in
vocabulary order whose cumulative renormalised probability exceeds u[row]. K (the largest top_k
allowed) is passed to the kernel, as a serving engine fixes it when it captures its graphs.

The inputs keep every decision away from its edge: the top_k[row]-th largest logit is LOGIT_GAP
above the next (the selection is exact in fp32, whatever the order of comparisons), and u lies
MARGIN (or half the chosen token's probability) past the cumulative probability before the chosen
token. An fp32 kernel errs by ~1e-7 there; logits rounded to bf16 cross both edges.
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import sampler_logits

#: The distance of u to the chosen token's interval edges, in renormalised probability.
MARGIN = 2e-4
#: The top_k[row]-th largest logit is at least this much above the (top_k[row] + 1)-th (0.1% in probability).
LOGIT_GAP = 1e-3


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "llm"
) -> dict[str, torch.Tensor]:
    b, v, k_max = axes["B"], axes["V"], axes["K"]
    if not 1 <= k_max < v:
        raise ValueError(f"top_k_sampling needs 1 <= K < V, got K = {k_max}, V = {v}")
    logits, gen = sampler_logits("top_k_sampling", b, v, axes, seed, device, distribution)
    aims = torch.rand((b, 2), generator=gen, device=device, dtype=torch.float64)
    top_k = choose_top_k(logits, aims[:, 0], k_max)
    u = uniforms_with_margin(logits, top_k, aims[:, 1])
    return {"logits": logits, "top_k": top_k.to(torch.int32), "u": u.float()}


def choose_top_k(logits: torch.Tensor, aims: torch.Tensor, k_max: int) -> torch.Tensor:
    """Per row, the k <= k_max nearest the aimed one (aims ~ U(0, 1) scaled to 1..k_max; row 0
    aims at k_max) whose k-th largest logit is LOGIT_GAP above the next. A row without such a k
    keeps the aimed one and gets the gap made (``open_gap``: ``logits`` is changed in place)."""
    ordered = logits.topk(k_max + 1, dim=-1).values  # descending
    valid = ordered[:, :-1] - ordered[:, 1:] >= LOGIT_GAP  # valid[:, j]: the gap after the (j + 1)-th
    aimed = (aims * k_max).long().clamp(max=k_max - 1) + 1
    aimed[0] = k_max
    ks = torch.arange(1, k_max + 1, device=logits.device)
    distance = (ks[None, :] - aimed[:, None]).abs().double().masked_fill(~valid, float("inf"))
    top_k = distance.argmin(dim=1) + 1
    for row in (~valid.any(dim=1)).nonzero().flatten().tolist():
        top_k[row] = aimed[row]
        open_gap(logits[row], int(aimed[row]))
    return top_k


def open_gap(row: torch.Tensor, k: int) -> None:
    """Lower every logit of ``row`` outside its k largest by 2 LOGIT_GAP, so the k-th is at least
    LOGIT_GAP above the next in fp32 (ties at the edge are broken by topk's choice)."""
    outside = torch.ones_like(row, dtype=torch.bool)
    outside[row.topk(k).indices] = False
    row[outside] -= 2 * LOGIT_GAP


def uniforms_with_margin(logits: torch.Tensor, top_k: torch.Tensor, aims: torch.Tensor) -> torch.Tensor:
    """Per row (fp64), a candidate drawn by its renormalised probability (the first whose cumulative
    probability exceeds the aim), then u just min(MARGIN, p / 2) past the cumulative probability
    before it."""
    probs = candidate_probabilities(logits.double(), top_k)
    cdf = probs.cumsum(dim=-1)
    last = torch.where(probs > 0, torch.arange(probs.shape[-1], device=probs.device), -1).amax(dim=-1)
    chosen = torch.searchsorted(cdf, (aims * cdf[:, -1])[:, None], right=True).squeeze(1)
    chosen = torch.minimum(chosen, last)  # an aim rounded onto the total: the last candidate
    p = probs.gather(1, chosen[:, None]).squeeze(1)
    start = cdf.gather(1, chosen[:, None]).squeeze(1) - p
    return start + torch.minimum(torch.full_like(p, MARGIN), p / 2)


def candidate_probabilities(logits: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """(B, V): the renormalised probability of each row's top_k[row] largest logits, 0 elsewhere
    (the definition over the whole vocabulary, by a full sort)."""
    ordered = logits.sort(dim=-1, descending=True).values
    threshold = ordered.gather(1, (top_k.long() - 1)[:, None])
    weights = torch.where(logits >= threshold, (logits - ordered[:, :1]).exp(), 0)
    return weights / weights.sum(dim=-1, keepdim=True)


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """The contract in fp64 from the fp32 inputs."""
    cdf = candidate_probabilities(inputs["logits"].double(), inputs["top_k"]).cumsum(dim=-1)
    token = torch.searchsorted(cdf, inputs["u"].double()[:, None], right=True).squeeze(1)
    return {"token": token.clamp(max=cdf.shape[-1] - 1).double()}


def baseline(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor, K: int) -> None:
    """torch.topk of the K largest (descending), the first top_k[row] kept and softmax'ed in fp32,
    sorted back into vocabulary order (the dropped ones last, with weight 0), then the inverse CDF
    (cumsum, searchsorted) over those K."""
    values, indices = logits.topk(K, dim=-1)
    dropped = torch.arange(K, device=logits.device)[None, :] >= top_k[:, None]
    weights = torch.softmax(values.masked_fill(dropped, float("-inf")), dim=-1)
    positions, order = indices.masked_fill(dropped, logits.shape[-1]).sort(dim=-1)
    cdf = weights.gather(1, order).cumsum(dim=-1)
    picked = torch.searchsorted(cdf, u[:, None], right=True)
    picked = torch.minimum(picked, (top_k.long() - 1)[:, None])  # never past the last candidate
    token.copy_(positions.gather(1, picked).squeeze(1))
