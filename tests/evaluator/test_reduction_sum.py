"""reduction_sum beyond the catalogue-wide checks of test_catalogue.py: the mistakes a reduction
kernel typically makes (caught on the CPU shapes) and the harness on the CPU development device.
Why the tolerance fails a bf16 accumulator but passes fp32 trees: its problem.toml."""

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

NAME = "reduction_sum"


def sum_without_the_tail(x: torch.Tensor, y: torch.Tensor) -> None:
    """Only whole vectors of 4 summed: the N mod 4 elements at each row's end are lost."""
    whole = x.shape[1] - x.shape[1] % 4
    torch.sum(x[:, :whole], dim=-1, out=y)


def mean_instead_of_sum(x: torch.Tensor, y: torch.Tensor) -> None:
    torch.mean(x, dim=-1, out=y)


def sum_of_magnitudes(x: torch.Tensor, y: torch.Tensor) -> None:
    """|x| summed (a norm, not a sum): right only where every element is positive."""
    torch.sum(x.abs(), dim=-1, out=y)


WRONG = [
    # one lost element of a long positive row is within 2e-5 of its sum: the mixed-sign rows catch it
    pytest.param(sum_without_the_tail, ("normal", "uniform", "outliers"), id="tail"),
    pytest.param(mean_instead_of_sum, None, id="mean"),
    pytest.param(sum_of_magnitudes, ("normal", "uniform", "outliers"), id="magnitudes"),
]


@pytest.mark.parametrize(("wrong", "exposed_by"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    wrong: Callable[..., None], exposed_by: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(NAME, wrong, exposed_by)


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(NAME, sum_without_the_tail, tmp_path)


def cancelling_row(n: int, seed: int) -> torch.Tensor:
    """One fp32 row of N(0,1) values less their mean: its sum is ~1e-6 (what the rounding to fp32
    leaves), while every partial sum of a tree or a chain is ~sqrt(n) and rounds like any row's."""
    generator = torch.Generator().manual_seed(seed)
    row = torch.randn(n, generator=generator, dtype=torch.float64)
    return (row - row.mean()).float().unsqueeze(0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_row_that_sums_to_nearly_zero_is_held_to_its_rounding_error_not_to_its_sum(seed: int) -> None:
    """Version 1 scaled atol by the outputs' RMS: for one row, |y| itself, so a cancelling row
    demanded ~1e-5 x 1e-6 of torch.sum (which errs by ~3e-5 here) and failed the baseline. Its
    atol now follows the row's L2 norm (reference.error_scale), and a wrong kernel still fails."""
    problem = get_problem(NAME)
    module = problem.reference_module()
    x = cancelling_row(65537, seed)
    reference = module.reference({"x": x}, {"R": 1, "N": 65537})["y"]
    assert reference.abs().item() < 1e-4
    tolerance = problem.tolerance_for("y")
    allowed = tolerance.allowed_error(reference, module.error_scale({"x": x}, {})["y"])
    error = (torch.sum(x, dim=-1).double() - reference).abs()
    assert (error > tolerance.atol * reference.abs() + tolerance.rtol * reference.abs()).all()  # v1 failed it
    assert (error <= allowed).all()
    one_element_lost = torch.sum(x[:, 1:], dim=-1).double()
    assert ((one_element_lost - reference).abs() > allowed).all()
