"""The Python API of the evaluator: ``evaluate(request) -> EvaluationReport``.

Runners and tests call this (or ``python -m evaluator run``, which wraps it). It never imports
the submission: that happens only in the untrusted child processes. The judge (this process, once
``evaluate`` runs) imports torch lazily, owns the buffers and decides every verdict
(evaluator/harness/single/judge.py, docs/security.md).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from evaluator.harness import assemble
from evaluator.harness.outcome import JudgeOutcome
from evaluator.harness.request import EvaluationRequest, Limits, world_size_of
from evaluator.problems import Problem, get_problem
from evaluator.report import EvaluationReport
from evaluator.vocabulary import CPU, CUDA, DEVICES, LANGUAGES, MODES, PYTHON, RANKED, TEST

if TYPE_CHECKING:
    from evaluator.harness.single.warm import WarmStart

__all__ = ["EvaluationRequest", "HarnessError", "Limits", "evaluate"]

#: Seconds of timing per shape (kernel, baseline) by (device, mode). docs/harness.md explains.
BUDGETS = {
    (CUDA, RANKED): (0.6, 0.4),
    (CUDA, TEST): (0.25, 0.15),
    (CPU, RANKED): (0.08, 0.04),
    (CPU, TEST): (0.05, 0.03),
}
#: Memory for the rotating input sets of one shape.
SET_CAP_BYTES = {CUDA: 4 << 30, CPU: 64 << 20}


class HarnessError(RuntimeError):
    """The evaluator itself could not run (not the submission's fault)."""


def _check(request: EvaluationRequest) -> None:
    if request.language not in LANGUAGES:
        raise ValueError(f"unknown language {request.language!r}")
    if request.device not in DEVICES:
        raise ValueError(f"unknown device {request.device!r}")
    if request.device == CPU and request.language != PYTHON:
        raise ValueError(
            f"{request.language} submissions need a GPU: the CPU development device runs Python only"
        )
    if request.mode not in MODES:
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


def evaluate(request: EvaluationRequest, warm: WarmStart | None = None,
             on_provisional: Callable[[EvaluationReport], None] | None = None) -> EvaluationReport:
    """Judge one submission: correctness, timing, witness, report (docs/harness.md).

    ``warm``: a warm spare's prepared child (``harness.warm``), used for this one job and closed.
    ``on_provisional``: ranked mode, called with the report as it stands when the ranked stage
    ended, before the witness (``witnessed`` false: shown, never ranked)."""
    _check(request)
    if warm is not None and warm.device != request.device:
        raise ValueError(f"a {request.device} job cannot run in a warm {warm.device} spare")
    problem = get_problem(request.problem)
    world_size = world_size_of(request, problem)
    if problem.kind == "multi" and warm is not None:
        raise ValueError(
            f"{problem.name} is a multi-GPU problem: warm spares hold one child, not {world_size} ranks"
        )
    if request.shape_ids:
        shape_ids = [problem.shape(shape_id).shape_id for shape_id in request.shape_ids]
    else:
        shape_ids = [shape.shape_id for shape in problem.select_shapes(request.shapes, request.device)]
        if not shape_ids and request.device == CPU:  # an import whose every shape needs a GPU
            raise ValueError(f"{problem.name} has no shape the CPU development device runs "
                             "(every shape needs a GPU): run it on a GPU")
    seeds = [request.seed] if request.seed is not None else list(problem.test_seeds)
    started, started_at = time.perf_counter(), assemble.now_iso()
    scratch = warm.scratch if warm is not None else Path(tempfile.mkdtemp(prefix="solboard-job-"))

    def provisional(outcome: JudgeOutcome) -> None:
        if on_provisional is not None:
            on_provisional(assemble.provisional(request, problem, shape_ids, outcome, started_at,
                                                time.perf_counter() - started))

    try:
        config = child_config(request, shape_ids, seeds)
        if problem.kind == "multi":
            outcome = _judge_multi(request, problem, shape_ids, config, scratch, world_size)
        else:
            outcome = _judge(request, problem, shape_ids, config, scratch, warm, provisional)
    finally:
        if warm is not None:
            warm.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return assemble.build(request, problem, shape_ids, outcome, started_at, time.perf_counter() - started)


def _judge(
    request: EvaluationRequest,
    problem: Problem,
    shape_ids: list[str],
    config: dict[str, object],
    scratch: Path,
    warm: WarmStart | None,
    provisional: Callable[[JudgeOutcome], None],
) -> JudgeOutcome:
    """The judge's whole job, then (ranked mode) the provisional report and the witness of every
    passed shape."""
    began = time.perf_counter()
    from evaluator.harness.single.judge import Judge
    from evaluator.harness.stages import HarnessFailure
    from evaluator.harness.witness.session import witness_shapes

    judge = Judge(request, problem, shape_ids, config, scratch, warm)
    # The judge's own imports (torch) and set-up, before its phases: seconds in a fresh process,
    # nothing in a warm spare, which did them before its job existed.
    judge.outcome.phase_seconds["judge_start"] = round(time.perf_counter() - began, 3)
    try:
        outcome = judge.run()
        if request.mode == RANKED and outcome.status is None:
            if any(result.timing for result in outcome.shapes):
                provisional(outcome)
            began = time.perf_counter()
            passed = [(problem.shape(result.shape_id), result) for result in outcome.shapes]
            outcome.notes += witness_shapes(judge, passed)
            # The witness's whole cost to the job: its stage, and the early load's wait before the
            # ranked stage (witness.session.await_load) when the test stage did not hide it all.
            waited = outcome.phase_seconds.get("witness.load_wait", 0.0)
            outcome.phase_seconds["witness"] = round(time.perf_counter() - began + waited, 3)
    except HarnessFailure as error:
        raise HarnessError(str(error)) from error
    finally:
        judge.close_witness()
        judge.arena.close()
    return outcome


def _judge_multi(
    request: EvaluationRequest,
    problem: Problem,
    shape_ids: list[str],
    config: dict[str, object],
    scratch: Path,
    world_size: int,
) -> JudgeOutcome:
    """A multi-GPU problem: one judge, ``world_size`` ranks (docs/multigpu.md)."""
    from evaluator.harness.multi.multi_judge import judge_multi
    from evaluator.harness.stages import HarnessFailure

    try:
        return judge_multi(request, problem, shape_ids, config, scratch, world_size)
    except HarnessFailure as error:  # the multi-GPU judge fails only before the import (start-up, baseline)
        raise HarnessError(str(error)) from error
