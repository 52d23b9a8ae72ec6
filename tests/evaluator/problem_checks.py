"""Checks every problem's own test file makes: a wrong kernel fails the tolerance on the CPU cases
that expose it, and the example and the baseline pass the real harness (CLI) on the CPU device."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from evaluator.problems import get_problem
from tests.evaluator.test_catalogue import cpu_cases, failed_outputs, run_kernel
from tests.harness_helpers import REPO, evaluate_file


def baseline_source(name: str) -> str:
    return f"from evaluator.problems.{name}.reference import baseline as kernel\n"


def assert_wrong_kernel_fails(
    name: str,
    wrong: Callable[..., None],
    exposed_by: tuple[str, ...] | None,
    shapes: tuple[str, ...] | None = None,
) -> None:
    """``wrong`` fails on every CPU case of the distributions ``exposed_by`` (None: all) and of
    ``shapes`` (None: all)."""
    problem = get_problem(name)
    cases = [
        (shape, seed, distribution)
        for shape, seed, distribution in cpu_cases(problem)
        if (exposed_by is None or distribution in exposed_by) and (shapes is None or shape.shape_id in shapes)
    ]
    assert cases
    for shape, seed, distribution in cases:
        outputs, reference, scales = run_kernel(problem, wrong, shape, seed, distribution)
        assert failed_outputs(problem, outputs, reference, scales), (shape.shape_id, seed, distribution)


def assert_example_and_baseline_pass(name: str, tmp_path: Path) -> None:
    baseline = tmp_path / f"{name}_baseline.py"
    baseline.write_text(baseline_source(name))
    cpu_shapes = [shape.shape_id for shape in get_problem(name).select_shapes("all", device="cpu")]
    for path in (REPO / "examples" / "python" / f"{name}.py", baseline):
        report = evaluate_file(name, path, "--device", "cpu")
        assert report["status"] == "PASSED", (path.name, report["message"])
        assert [shape["shape_id"] for shape in report["shapes"]] == cpu_shapes


def submission_source(kernel: Callable[..., None], imports: str = "import torch\n") -> str:
    """A submission file whose ``kernel`` is this test function (its source under ``imports``)."""
    return f"{imports}\n\n{inspect.getsource(kernel)}\n\nkernel = {kernel.__name__}\n"


def assert_harness_reports_incorrect(
    name: str, wrong: Callable[..., None], tmp_path: Path, imports: str = "import torch\n"
) -> None:
    """``wrong`` as a whole submission through the CLI harness on the CPU: INCORRECT_NUMERICAL."""
    path = tmp_path / f"{name}_wrong.py"
    path.write_text(submission_source(wrong, imports))
    report = evaluate_file(name, path, "--device", "cpu")
    assert report["status"] == "INCORRECT_NUMERICAL", report["message"]
    assert "outside tolerance" in report["message"]
