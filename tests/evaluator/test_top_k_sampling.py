"""top_k_sampling beyond the catalogue-wide checks of test_catalogue.py: the inputs keep every
decision its margin away from the edge (what lets any fp32 order pick the same token), the gap is
made where a row has none, the mistakes a sampler typically makes (caught on the CPU shapes) and the
harness on the CPU device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from evaluator.problems import get_problem
from tests.evaluator.problem_checks import (
    assert_example_and_baseline_pass,
    assert_harness_reports_incorrect,
    assert_wrong_kernel_fails,
)
from tests.evaluator.test_catalogue import cpu_cases

NAME = "top_k_sampling"


def test_every_decision_is_its_margin_away_from_the_edge() -> None:
    """In fp64 from the fp32 inputs: 1 <= top_k <= K, row 0 near K, the top_k-th largest logit
    LOGIT_GAP above the next, and u inside the chosen token's interval by min(MARGIN, p / 2)."""
    problem = get_problem(NAME)
    module = problem.reference_module()
    for shape, seed, distribution in cpu_cases(problem):
        inputs = module.generate_inputs(shape.axes, seed, "cpu", distribution)
        chosen = module.reference(inputs, shape.axes)["token"].long()
        top_k = inputs["top_k"].long()
        assert int(top_k.min()) >= 1 and int(top_k.max()) <= shape.axes["K"]
        assert int(top_k[0]) >= shape.axes["K"] * 0.9
        for row in range(shape.axes["B"]):
            k = int(top_k[row])
            logits = inputs["logits"][row].double()
            ordered = logits.sort(descending=True).values
            assert float(ordered[k - 1] - ordered[k]) >= module.LOGIT_GAP * 0.99
            probs = torch.where(logits >= ordered[k - 1], (logits - ordered[0]).exp(), 0)
            probs /= probs.sum()
            assert probs[chosen[row]] > 0
            start = float(probs[: chosen[row]].sum())
            room = min(module.MARGIN, float(probs[chosen[row]]) / 2) * 0.99  # fp32 rounding of u
            u = float(inputs["u"][row])
            assert u - start >= room and start + float(probs[chosen[row]]) - u >= room


def test_a_row_without_a_gap_gets_one_at_the_aimed_k() -> None:
    """All logits equal: no k has its gap, so the aimed k stays and the rest are lowered."""
    module = get_problem(NAME).reference_module()
    logits = torch.zeros((2, 64))
    top_k = module.choose_top_k(logits, torch.tensor([0.0, 0.5], dtype=torch.float64), 8)
    assert top_k.tolist() == [8, 5]  # row 0 aims at K
    for row, k in enumerate(top_k.tolist()):
        ordered = logits[row].sort(descending=True).values
        assert float(ordered[k - 1] - ordered[k]) >= module.LOGIT_GAP
        assert int((logits[row] == 0).sum()) == k


def test_k_must_leave_a_token_outside() -> None:
    module = get_problem(NAME).reference_module()
    with pytest.raises(ValueError, match="1 <= K < V"):
        module.generate_inputs({"B": 2, "V": 16, "K": 16}, 1, "cpu", "llm")


# ---------------------------------------------------------------- wrong kernels


def greedy(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor, K: int) -> None:
    """The most probable token (no sampling)."""
    token.copy_(logits.argmax(dim=-1))


def the_same_k_for_every_row(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor,
                             K: int) -> None:
    """Every row sampled from its K largest: the per-row top_k ignored."""
    from evaluator.problems.top_k_sampling.reference import baseline

    baseline(logits, torch.full_like(top_k, K), u, token, K)


def sampling_in_order_of_probability(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor,
                                     token: torch.Tensor, K: int) -> None:
    """The right candidates, but u walked over them from the most probable down (topk's order),
    not in vocabulary order."""
    values, indices = logits.topk(K, dim=-1)
    dropped = torch.arange(K)[None, :] >= top_k[:, None]
    cdf = torch.softmax(values.masked_fill(dropped, float("-inf")), dim=-1).cumsum(dim=-1)
    picked = torch.minimum(torch.searchsorted(cdf, u[:, None], right=True), (top_k.long() - 1)[:, None])
    token.copy_(indices.gather(1, picked).squeeze(1))


def one_candidate_too_many(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor,
                           K: int) -> None:
    """top_k + 1 candidates (an off-by-one threshold: logits >= the (k+1)-th largest)."""
    from evaluator.problems.top_k_sampling.reference import baseline

    wider = torch.minimum(top_k + 1, torch.full_like(top_k, K))
    baseline(logits, wider, u, token, K)


# k + 1 candidates: at K = 300 the extra one often holds less probability than u's margin, and
# then it picks the same token (nothing to catch in 8 rows); the 16 rows of K = 50 expose it.
WRONG = [
    pytest.param(greedy, None, id="greedy"),
    pytest.param(the_same_k_for_every_row, None, id="one-k"),
    pytest.param(sampling_in_order_of_probability, None, id="probability-order"),
    pytest.param(one_candidate_too_many, ("b16_v1000_k50",), id="k-plus-one"),
]


@pytest.mark.parametrize("wrong, shapes", WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    wrong: Callable[..., None], shapes: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(NAME, wrong, None, shapes)


# ---------------------------------------------------------------- the harness, CPU device


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(NAME, the_same_k_for_every_row, tmp_path)
