"""top_p_sampling inputs, reference (fp64) and baseline (sort, cumsum, threshold, cumsum, search).

The contract: probs = softmax(logits) per row; the nucleus is every token whose probability is at
least tau, where tau is the probability of the k-th most probable token and k the smallest count
whose k most probable tokens hold at least top_p; mass = the nucleus's probability. The token is
the first index i (vocabulary order) whose nucleus-only cumulative probability exceeds u * mass.
Sorting is not required: tau can be found by a search over thresholds, the pick by a scan.

The inputs keep every decision MARGIN away from its edge (below): top_p lies MARGIN above the
mass of the k - 1 most probable tokens, u * mass MARGIN above the cumulative probability before the
chosen token, and the tokens around the threshold differ by REL_GAP in probability. An fp32 kernel
errs by ~1e-6 at most there; probabilities from bf16 logits or a bf16 softmax (2^-9 relative)
cross the edges.
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import sampler_logits

#: Every decision's distance to its edge, in probability (the row's total is 1).
MARGIN = 2e-4
#: The nucleus's last token is at least this much more probable (relative) than the next one.
REL_GAP = 1e-3
#: The top_p aimed at, per row ~ U(0.5, 0.95) (then moved to the nearest valid boundary).
TOP_P_RANGE = (0.5, 0.95)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "llm"
) -> dict[str, torch.Tensor]:
    b, v = axes["B"], axes["V"]
    logits, gen = sampler_logits("top_p_sampling", b, v, axes, seed, device, distribution)
    probs = torch.softmax(logits.double(), dim=-1)
    aims = torch.rand((b, 3), generator=gen, device=device, dtype=torch.float64)
    top_p = torch.empty(b, dtype=torch.float64, device=device)
    u = torch.empty(b, dtype=torch.float64, device=device)
    for row in range(b):
        top_p[row], u[row] = _decisions(probs[row], aims[row])
    return {"logits": logits, "top_p": top_p.float(), "u": u.float()}


def _decisions(probs: torch.Tensor, aims: torch.Tensor) -> tuple[float, float]:
    """(top_p, u) for one row: the nucleus boundary nearest the aimed top_p among those with room
    (its last token above 2 MARGIN and REL_GAP above the next), then a chosen token of the nucleus
    (drawn by probability) and u just MARGIN past the cumulative probability before it."""
    ordered, order = probs.sort(descending=True)
    cumulative = ordered.cumsum(0)
    following = torch.cat([ordered[1:], ordered.new_zeros(1)])
    valid = (ordered >= 2 * MARGIN) & (ordered >= following * (1 + REL_GAP))
    valid[0] = True  # the most probable token alone is always a nucleus (k = 1)
    aim = TOP_P_RANGE[0] + float(aims[0]) * (TOP_P_RANGE[1] - TOP_P_RANGE[0])
    candidates = valid.nonzero().flatten()
    k = int(candidates[(cumulative[candidates] - aim).abs().argmin()]) + 1  # nucleus size
    before = float(cumulative[k - 2]) if k > 1 else 0.0
    top_p = before + min(MARGIN, float(ordered[k - 1]) / 2)
    nucleus = torch.zeros_like(probs)
    nucleus[order[:k]] = probs[order[:k]]
    mass = float(nucleus.sum())
    chosen = int(
        torch.searchsorted(nucleus.cumsum(0), float(aims[1]) * mass, right=True).clamp(max=probs.numel() - 1)
    )
    while nucleus[chosen] == 0:  # the search landed past the last nucleus token (rounding): step back
        chosen -= 1
    start = float(nucleus[:chosen].sum())
    u = (start + min(MARGIN, float(nucleus[chosen]) / 2)) / mass
    return top_p, u


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """The contract in fp64 from the fp32 inputs."""
    return {
        "token": _sample(inputs["logits"].double(), inputs["top_p"].double(), inputs["u"].double()).double()
    }


def _sample(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    ordered = probs.sort(dim=-1, descending=True).values
    k = (ordered.cumsum(dim=-1) < top_p[:, None]).sum(dim=-1).clamp(max=probs.shape[-1] - 1)
    tau = ordered.gather(1, k[:, None])
    nucleus = torch.where(probs >= tau, probs, torch.zeros_like(probs))
    cdf = nucleus.cumsum(dim=-1)
    token = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
    return token.clamp(max=probs.shape[-1] - 1)


def baseline(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor, token: torch.Tensor) -> None:
    """The sort-based nucleus of Hugging Face's TopPLogitsWarper (softmax, sort, cumsum, the
    threshold), then the inverse CDF in vocabulary order (cumsum, searchsorted), in fp32."""
    token.copy_(_sample(logits, top_p, u))
