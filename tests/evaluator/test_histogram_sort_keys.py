"""histogram and sort_keys beyond the catalogue-wide checks of test_catalogue.py: what each
distribution promises (the contention and the arrangements it claims), the mistakes a kernel for
them typically makes (caught on the CPU shapes) and the harness on the CPU development device (the
example and the baseline pass; a wrong kernel is INCORRECT_NUMERICAL)."""

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

NAMES = ["histogram", "sort_keys"]


def inputs(name: str, axes: dict[str, int], distribution: str, seed: int = 1) -> torch.Tensor:
    return get_problem(name).reference_module().generate_inputs(axes, seed, "cpu", distribution)["x"]


# ---------------------------------------------------------------- distributions


def test_histogram_distributions_stay_in_range_and_have_their_shape() -> None:
    axes = {"N": 100003, "B": 256}
    for distribution in get_problem("histogram").distributions:
        x = inputs("histogram", axes, distribution)
        assert int(x.min()) >= 0 and int(x.max()) < 256, distribution
    uniform = torch.bincount(inputs("histogram", axes, "uniform").long(), minlength=256)
    assert int(uniform.min()) > 250 and int(uniform.max()) < 550  # ~391 each
    hot = torch.bincount(inputs("histogram", axes, "hot").long(), minlength=256)
    assert 0.89 < int(hot.max()) / 100003 < 0.91
    zipf = (
        torch.bincount(inputs("histogram", axes, "zipf").long(), minlength=256).sort(descending=True).values
    )
    assert int(zipf[:8].sum()) > 100003 // 3 and int(zipf[0]) < 100003 // 3  # skewed, not one bin
    ordered = inputs("histogram", axes, "sorted")
    assert torch.equal(ordered, ordered.sort().values)


def test_sort_keys_distributions_span_the_signed_range_in_their_arrangements() -> None:
    axes = {"R": 7, "N": 1001}
    uniform = inputs("sort_keys", axes, "uniform").long()
    assert int(uniform.min()) < -(2**30) and int(uniform.max()) > 2**30
    few = inputs("sort_keys", axes, "few_unique")
    assert all(len(row.unique()) <= 16 for row in few)
    descending = inputs("sort_keys", axes, "descending")
    assert torch.equal(descending, descending.sort(dim=-1, descending=True).values)
    nearly = inputs("sort_keys", axes, "nearly_sorted")
    out_of_place = (nearly != nearly.sort(dim=-1).values).double().mean().item()
    assert 0 < out_of_place < 0.05


# ---------------------------------------------------------------- wrong kernels
# Each is a whole submission: ``submission`` writes its source under the imports below.


def histogram_of_the_next_bin(x: torch.Tensor, counts: torch.Tensor) -> None:
    """Each key counted in bin key + 1 (an off-by-one in the address; the last bin wraps)."""
    counts.copy_(torch.bincount((x.long() + 1) % counts.shape[0], minlength=counts.shape[0]))


def histogram_without_the_tail(x: torch.Tensor, counts: torch.Tensor) -> None:
    """Only whole tiles of 1024 keys counted: the N mod 1024 keys at the end are lost."""
    whole = x.shape[0] - x.shape[0] % 1024
    counts.copy_(torch.bincount(x[:whole].long(), minlength=counts.shape[0]))


def histogram_of_a_lost_update(x: torch.Tensor, counts: torch.Tensor) -> None:
    """Increments without atomics: of equal keys in one warp (32 in a row) only one lands."""
    lanes = x.long()
    first_in_warp = torch.ones_like(lanes, dtype=torch.bool)
    positions = torch.arange(lanes.shape[0])
    earlier = positions % 32 != 0
    first_in_warp[earlier] = lanes[earlier] != lanes[positions[earlier] - 1]
    counts.copy_(torch.bincount(lanes[first_in_warp], minlength=counts.shape[0]))


def sort_keys_as_unsigned(x: torch.Tensor, y: torch.Tensor) -> None:
    """A radix sort without the sign flip: negative keys (high bit set) end up last."""
    unsigned = x.long() % 2**32
    ordered = torch.sort(unsigned, dim=-1).values
    y.copy_(torch.where(ordered >= 2**31, ordered - 2**32, ordered))


def sort_keys_in_tiles_only(x: torch.Tensor, y: torch.Tensor) -> None:
    """Each tile of 256 keys sorted, the tiles never merged."""
    out = x.clone()
    for start in range(0, x.shape[1], 256):
        out[:, start : start + 256] = torch.sort(x[:, start : start + 256], dim=-1).values
    y.copy_(out)


def sort_keys_descending(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(torch.sort(x, dim=-1, descending=True).values)


WRONG = [
    pytest.param("histogram", histogram_of_the_next_bin, None, id="histogram-next-bin"),
    pytest.param("histogram", histogram_without_the_tail, None, id="histogram-tail"),
    pytest.param("histogram", histogram_of_a_lost_update, ("hot", "sorted"), id="histogram-lost-update"),
    pytest.param("sort_keys", sort_keys_as_unsigned, None, id="sort-unsigned"),
    pytest.param("sort_keys", sort_keys_in_tiles_only, None, id="sort-tiles"),
    pytest.param("sort_keys", sort_keys_descending, None, id="sort-descending"),
]


@pytest.mark.parametrize(("name", "wrong", "exposed_by"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    name: str, wrong: Callable[..., None], exposed_by: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(name, wrong, exposed_by)


# ---------------------------------------------------------------- the harness, CPU device


@pytest.mark.parametrize("name", NAMES)
def test_the_example_and_the_baseline_pass_through_the_harness(name: str, tmp_path: Path) -> None:
    assert_example_and_baseline_pass(name, tmp_path)


@pytest.mark.parametrize(
    ("name", "wrong"),
    [("histogram", histogram_without_the_tail), ("sort_keys", sort_keys_as_unsigned)],
    ids=NAMES,
)
def test_the_harness_reports_a_wrong_submission_as_incorrect(
    name: str, wrong: Callable[..., None], tmp_path: Path
) -> None:
    assert_harness_reports_incorrect(name, wrong, tmp_path)
