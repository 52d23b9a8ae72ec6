"""moe_unpermute beyond the catalogue-wide checks of test_catalogue.py: it inverts moe_permute (the
same dest_rows; permute then combine gives each token's row back), the mistakes a combine kernel
typically makes (caught on the CPU shapes) and the harness on the CPU development device."""

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

NAME = "moe_unpermute"


def test_dest_rows_are_moe_permutes_and_the_combine_inverts_the_permute() -> None:
    """With moe_permute's outputs as expert_out (every slot of a token holds its own hidden row) and
    weights summing to 1, the combine gives each hidden row back."""
    permute, unpermute = get_problem("moe_permute"), get_problem(NAME)
    for shape in unpermute.select_shapes("all", device="cpu"):
        for distribution in unpermute.distributions:
            ours = unpermute.reference_module().generate_inputs(shape.axes, 1, "cpu", distribution)
            theirs = permute.reference_module().generate_inputs(shape.axes, 1, "cpu", distribution)
            permuted = permute.reference_module().reference(theirs, shape.axes)
            assert torch.equal(ours["dest_rows"].long(), permuted["dest_rows"].long()), distribution
            assert torch.allclose(ours["topk_weights"].sum(dim=1), torch.ones(shape.axes["T"]))
            combined = unpermute.reference_module().reference(
                {
                    "expert_out": permuted["permuted"],
                    "dest_rows": ours["dest_rows"],
                    "topk_weights": ours["topk_weights"],
                },
                shape.axes,
            )["out"]
            assert torch.allclose(combined, theirs["hidden"].double(), rtol=1e-6, atol=0), (
                distribution
            )  # fp32 weights sum to 1 +- 1e-7


# ---------------------------------------------------------------- wrong kernels


def unpermute_unweighted(expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_weights: torch.Tensor,
                         out: torch.Tensor) -> None:
    """The K rows averaged: the router's weights ignored."""
    out.copy_(expert_out.float()[dest_rows.long()].mean(dim=1))


def unpermute_with_the_next_slots_weight(expert_out: torch.Tensor, dest_rows: torch.Tensor,
                                         topk_weights: torch.Tensor, out: torch.Tensor) -> None:
    """Row j weighted by slot j + 1's weight (the weights read in another order than the rows)."""
    weights = topk_weights.roll(1, dims=1)
    out.copy_((weights[..., None] * expert_out.float()[dest_rows.long()]).sum(dim=1))


def unpermute_in_token_order(expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_weights: torch.Tensor,
                             out: torch.Tensor) -> None:
    """Rows t*K + j read as if the expert outputs were still in token order (dest_rows ignored)."""
    t, k = dest_rows.shape
    rows = expert_out.float().view(t, k, -1)
    out.copy_((topk_weights[..., None] * rows).sum(dim=1))


WRONG = [
    pytest.param(unpermute_unweighted, id="unweighted"),
    pytest.param(unpermute_with_the_next_slots_weight, id="next-slot-weight"),
    pytest.param(unpermute_in_token_order, id="token-order"),
]


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_kernel_fails_the_tolerance(wrong: Callable[..., None]) -> None:
    assert_wrong_kernel_fails(NAME, wrong, None)


# ---------------------------------------------------------------- the harness, CPU device


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(NAME, unpermute_in_token_order, tmp_path)
