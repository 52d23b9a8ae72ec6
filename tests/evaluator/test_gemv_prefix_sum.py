"""gemv_bf16 and prefix_sum beyond the catalogue-wide checks of test_catalogue.py: their counts
against a brute-force count, the errors their tolerances are argued to reject, and the harness on
the CPU development device (the example and the baseline pass; a wrong kernel is INCORRECT)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from evaluator.problems import get_problem
from tests.evaluator.problem_checks import assert_example_and_baseline_pass
from tests.evaluator.test_catalogue import cpu_cases, failed_outputs, run_kernel
from tests.harness_helpers import evaluate_file

CPU = ("--device", "cpu")

#: A split-K GEMV that forgets the last K tile (a partial one when 64 does not divide K).
GEMV_DROPS_THE_LAST_K_TILE = """
import torch

def kernel(x, W, y):
    k = x.shape[1]
    kept = k - (k % 64 or 64)
    y.copy_(x[:, :kept].float() @ W[:, :kept].float().t())
"""

#: An exclusive scan: y[i] = x[0] + ... + x[i-1], off by x[i] everywhere.
EXCLUSIVE_SCAN = """
import torch

def kernel(x, y):
    y[:, :1] = 0
    y[:, 1:] = torch.cumsum(x, dim=-1)[:, :-1]
"""

WRONG = {"gemv_bf16": GEMV_DROPS_THE_LAST_K_TILE, "prefix_sum": EXCLUSIVE_SCAN}


def compiled(source: str) -> Callable[..., None]:
    namespace: dict = {}
    exec(source, namespace)  # the test's own source
    return namespace["kernel"]


def to_tf32(values: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to tf32's 10 mantissa bits (round half up on the 13 dropped bits)."""
    bits = values.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def prefix_sum_with_tf32_outputs(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(to_tf32(torch.cumsum(x, dim=-1)))


# ---------------------------------------------------------------- counts


def brute_force_gemv(b: int, n: int, k: int) -> int:
    """Flops of y = x @ W^T done one multiply and one add at a time."""
    flops = 0
    for _ in range(b * n):
        for _ in range(k):
            flops += 2  # acc += x[b, k] * W[n, k]
    return flops


def brute_force_scan(r: int, n: int) -> int:
    """Adds of an inclusive scan: y[0] = x[0], then y[i] = y[i - 1] + x[i]."""
    return sum(1 for _ in range(r) for _ in range(1, n))


@pytest.mark.parametrize("axes", [{"B": 1, "N": 3, "K": 5}, {"B": 4, "N": 7, "K": 16}])
def test_gemv_flops_match_a_brute_force_count(axes: dict[str, int]) -> None:
    counts = get_problem("gemv_bf16").counts(axes)
    assert counts.flops == {"bf16_tensor": float(brute_force_gemv(axes["B"], axes["N"], axes["K"]))}


@pytest.mark.parametrize("axes", [{"R": 1, "N": 1}, {"R": 3, "N": 17}, {"R": 5, "N": 64}])
def test_prefix_sum_flops_match_a_brute_force_count(axes: dict[str, int]) -> None:
    counts = get_problem("prefix_sum").counts(axes)
    assert counts.flops == {"fp32_simt": float(brute_force_scan(axes["R"], axes["N"]))}


# ---------------------------------------------------------------- what the tolerances reject


def failing_cases(name: str, kernel: Callable[..., None]) -> list[bool]:
    """For every CPU case, whether some output falls below its matched ratio."""
    problem = get_problem(name)
    return [
        bool(failed_outputs(problem, *run_kernel(problem, kernel, shape, seed, distribution)))
        for shape, seed, distribution in cpu_cases(problem)
    ]


def test_a_gemv_that_drops_the_last_k_tile_fails_every_case() -> None:
    assert all(failing_cases("gemv_bf16", compiled(GEMV_DROPS_THE_LAST_K_TILE)))


def test_a_scan_rounded_to_tf32_fails_every_case() -> None:
    assert all(failing_cases("prefix_sum", prefix_sum_with_tf32_outputs))


def test_an_exclusive_scan_fails_every_case() -> None:
    """Off by x[i]: far beyond 1e-4 of the row's RMS on the mixed-sign rows; on a `positive` row of
    65537 the allowance is ~3 near the start, which only |x[i]| > 3 exceed (~180 of the draws)."""
    assert all(failing_cases("prefix_sum", compiled(EXCLUSIVE_SCAN)))


# ---------------------------------------------------------------- the harness, CPU device



@pytest.mark.parametrize("name", ["gemv_bf16", "prefix_sum"])
def test_the_example_and_the_baseline_pass_through_the_harness(name: str, tmp_path: Path) -> None:
    assert_example_and_baseline_pass(name, tmp_path)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_kernel_is_incorrect(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}_wrong.py"
    path.write_text(WRONG[name])
    report = evaluate_file(name, path, *CPU)
    assert report["status"] == "INCORRECT_NUMERICAL", report["message"]
    assert "outside tolerance" in report["message"]
