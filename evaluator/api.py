"""The Python API of the evaluator: ``evaluate(request) -> EvaluationReport``.

Runners and tests call this (or ``python -m evaluator run``, which wraps it). It never imports
the submission, nor torch: all of that happens in the child process (evaluator/harness/).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from evaluator.harness import assemble, parent
from evaluator.harness.request import EvaluationRequest, Limits
from evaluator.problems import LANGUAGES, get_problem
from evaluator.report import EvaluationReport, ProfileReport

__all__ = ["EvaluationRequest", "HarnessError", "Limits", "evaluate"]

#: Seconds of timing per shape (kernel, baseline) by (device, mode). docs/harness.md explains.
BUDGETS = {
    ("cuda", "ranked"): (0.6, 0.4),
    ("cuda", "test"): (0.25, 0.15),
    ("cpu", "ranked"): (0.08, 0.04),
    ("cpu", "test"): (0.05, 0.03),
}
#: Memory for the rotating input sets of one shape.
SET_CAP_BYTES = {"cuda": 4 << 30, "cpu": 64 << 20}


class HarnessError(RuntimeError):
    """The evaluator itself could not run (not the submission's fault)."""


def _check(request: EvaluationRequest) -> None:
    if request.language not in LANGUAGES:
        raise ValueError(f"unknown language {request.language!r}")
    if request.device not in ("cuda", "cpu"):
        raise ValueError(f"unknown device {request.device!r}")
    if request.mode not in ("test", "ranked"):
        raise ValueError(f"unknown mode {request.mode!r}")
    if not Path(request.file).is_file():
        raise FileNotFoundError(f"no such submission file: {request.file}")


def child_config(
    request: EvaluationRequest, shape_ids: list[str], public_seeds: list[int]
) -> dict[str, object]:
    kernel_s, baseline_s = request.budget_s or BUDGETS[(request.device, request.mode)]
    return {
        "type": "config",
        "problem": request.problem,
        "file": str(Path(request.file).resolve()),
        "language": request.language,
        "spec": str(Path(request.spec).resolve()) if request.spec else None,
        "device": request.device,
        "mode": request.mode,
        "shapes": shape_ids,
        "public_seeds": public_seeds,
        "budgets": {"kernel": kernel_s, "baseline": baseline_s},
        "set_cap_bytes": SET_CAP_BYTES[request.device],
    }


def evaluate(request: EvaluationRequest) -> EvaluationReport:
    _check(request)
    problem = get_problem(request.problem)
    if request.shape_ids:
        shape_ids = [problem.shape(shape_id).shape_id for shape_id in request.shape_ids]
    else:
        shape_ids = [shape.shape_id for shape in problem.select_shapes(request.shapes, request.device)]
    seeds = [request.seed] if request.seed is not None else list(problem.test_seeds)
    started, started_at = time.perf_counter(), assemble.now_iso()
    outcome = parent.run_child(request, child_config(request, shape_ids, seeds))
    if outcome.status == "INTERNAL":
        raise HarnessError(f"{outcome.message}\n{outcome.log[-4000:]}")
    profiling_began = time.perf_counter()
    profiles = _profiles(request, problem, outcome)
    if profiles:
        outcome.phase_seconds["profile"] = round(time.perf_counter() - profiling_began, 3)
    return assemble.build(
        request, problem, shape_ids, outcome, started, started_at, profiles, time.perf_counter() - started
    )


def _profiles(
    request: EvaluationRequest, problem: object, outcome: parent.ChildOutcome
) -> dict[str, ProfileReport]:
    """Ranked mode on a GPU: one untimed Nsight Compute pass per passed shape."""
    if request.mode != "ranked" or request.device != "cuda" or not request.profile or outcome.body is None:
        return {}
    passed = [
        shape["shape_id"] for shape in outcome.body.get("shapes", []) if shape.get("status") == "PASSED"
    ]
    if not passed:
        return {}
    from evaluator.harness import profile

    if shutil.which("ncu") is None:
        missing = ProfileReport(available=False, reason="ncu not found on this runner")
        return {shape_id: missing for shape_id in passed}
    return profile.profile_shapes(request, passed, request.limits.ranked_s)
