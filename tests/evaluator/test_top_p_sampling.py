"""top_p_sampling beyond the catalogue-wide checks of test_catalogue.py: the inputs keep every
decision its margin away from the edge (what lets any fp32 order pick the same token), the
mistakes a sampler typically makes (caught on the CPU shapes) and the harness on the CPU device."""

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

NAME = "top_p_sampling"


def test_every_decision_is_its_margin_away_from_the_edge() -> None:
    """In fp64 from the fp32 inputs: top_p at least MARGIN (or half the last token) above the mass
    of the k - 1 most probable tokens and below that of the k most probable, the last nucleus token
    REL_GAP above the next, and u * mass inside the chosen token's interval by the same margin."""
    problem = get_problem(NAME)
    module = problem.reference_module()
    for shape, seed, distribution in cpu_cases(problem):
        inputs = module.generate_inputs(shape.axes, seed, "cpu", distribution)
        chosen = module.reference(inputs, shape.axes)["token"].long()
        probs = torch.softmax(inputs["logits"].double(), dim=-1)
        for row in range(shape.axes["B"]):
            ordered = probs[row].sort(descending=True).values
            cumulative = ordered.cumsum(0)
            p = float(inputs["top_p"][row])
            k = int((cumulative < p).sum()) + 1
            before = float(cumulative[k - 2]) if k > 1 else 0.0
            room = min(module.MARGIN, float(ordered[k - 1]) / 2) * 0.99  # fp32 rounding of top_p
            assert p - before >= room and float(cumulative[k - 1]) - p >= room
            assert k == ordered.numel() or float(ordered[k - 1]) >= float(ordered[k]) * (1 + module.REL_GAP)
            nucleus = torch.where(probs[row] >= ordered[k - 1], probs[row], 0)
            target = float(inputs["u"][row]) * float(nucleus.sum())
            start = float(nucleus[: chosen[row]].sum())
            assert target - start >= min(module.MARGIN, float(nucleus[chosen[row]]) / 2) * 0.99
            assert start + float(nucleus[chosen[row]]) - target > 0


# ---------------------------------------------------------------- wrong kernels


def greedy(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor, token: torch.Tensor) -> None:
    """The most probable token (no sampling)."""
    token.copy_(logits.argmax(dim=-1))


def sampling_without_a_nucleus(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor,
                               token: torch.Tensor) -> None:
    """u over the whole distribution: top_p ignored."""
    cdf = torch.softmax(logits, dim=-1).cumsum(dim=-1)
    picked = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
    token.copy_(picked.clamp(max=logits.shape[-1] - 1))


def sampling_in_order_of_probability(logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor,
                                     token: torch.Tensor) -> None:
    """The right nucleus, but u walked over it from the most probable token down (the sorted
    order), not in vocabulary order."""
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    cumulative = probs.cumsum(dim=-1)
    k = (cumulative < top_p[:, None]).sum(dim=-1, keepdim=True)
    nucleus = torch.where(torch.arange(probs.shape[-1]) <= k, probs, 0)
    cdf = nucleus.cumsum(dim=-1)
    position = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=probs.shape[-1] - 1)
    token.copy_(order.gather(1, position).squeeze(1))


WRONG = [
    pytest.param(greedy, id="greedy"),
    pytest.param(sampling_without_a_nucleus, id="no-nucleus"),
    pytest.param(sampling_in_order_of_probability, id="probability-order"),
]


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_kernel_fails_the_tolerance(wrong: Callable[..., None]) -> None:
    assert_wrong_kernel_fails(NAME, wrong, None)


# ---------------------------------------------------------------- the harness, CPU device


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(NAME, sampling_without_a_nucleus, tmp_path)
