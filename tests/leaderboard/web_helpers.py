"""Evaluations as the site stores them, for the website's tests and the web benchmark's seed.

``gpu_report`` builds a report the way the evaluator does for a GPU run: the figures come from
``evaluator.scoring.sol_figures`` on the catalogue's counts and the GPU's peaks, only the kernel
and baseline times are chosen by the test. ``evaluate`` stores it through the site's own path
(``dispatch.store_result``: validation, ShapeResults, score; then the rankings).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from evaluator.gpu_specs import get_gpu_spec
from evaluator.problems import get_problem
from evaluator.report import (
    DeviceInfo,
    EvaluationReport,
    ProfileReport,
    ShapeReport,
    Status,
    Telemetry,
    TimingStats,
    Witness,
)
from evaluator.scoring import problem_score, sol_figures
from leaderboard import dispatch
from leaderboard.models import Evaluation, Submission
from leaderboard.ranking_maintenance import refresh_rankings_for
from solboard_common.protocol import JobResult, JobStarted

RUNNER = "node-w:0"
SOURCE = "import torch\n\ndef kernel(a, b, c):\n    torch.add(a, b, out=c)\n"


def timing(median_us: float) -> TimingStats:
    return TimingStats(method="cupti", median_us=median_us, mean_us=median_us * 1.01, min_us=median_us * 0.98,
                       max_us=median_us * 1.1, std_us=median_us * 0.01, n=200, ci95_low_us=median_us * 0.995,
                       ci95_high_us=median_us * 1.005, ci95_half_width_rel=0.005, converged=True,
                       ranked_source="device_span")


def passed_shape(problem_name: str, gpu_key: str, axes: dict[str, int], ranked: bool, speed: float,
                 witnessed: bool) -> ShapeReport:
    """A PASSED shape whose kernel runs ``speed`` times as fast as a baseline at 50% of SOL (speed < 2)."""
    problem, spec = get_problem(problem_name), get_gpu_spec(gpu_key)
    counts = problem.counts(axes)
    from evaluator.sol import t_sol

    t_sol_us = t_sol(counts, spec, problem.world_size).t_sol_us
    baseline_us = t_sol_us / 0.5
    kernel_us = baseline_us / speed
    sol = sol_figures(counts, spec, kernel_us / 1e6, baseline_us / 1e6, world_size=problem.world_size)
    shape_id = "_".join(f"{name.lower()}{value}" for name, value in axes.items())
    witness = Witness(
        source="ncu",
        median_us=kernel_us,
        n=3,
        calls_us=[kernel_us * 1.02, kernel_us, kernel_us * 0.97],
        floor_us=kernel_us * 0.9,
        confirmed=witnessed,
    )
    profile = ProfileReport(available=True, tool="ncu 2025.3", kernels=[])
    telemetry = Telemetry(sm_clock_mhz=1980, mem_clock_mhz=3201, temperature_c=41, power_w=350.0)
    kernel_timing = timing(kernel_us)
    if problem.world_size > 1:  # each rank's own median; the slowest rank's is the ranked one
        kernel_timing.rank_median_us = [kernel_us * (0.98 + 0.02 * rank / (problem.world_size - 1))
                                        for rank in range(problem.world_size)]
    return ShapeReport(
        shape_id=shape_id,
        axes=axes,
        ranked=ranked,
        status=Status.PASSED,
        timing=kernel_timing,
        baseline_timing=timing(baseline_us),
        sol=sol,
        witness=witness,
        profile=profile,
        telemetry_before=telemetry,
        telemetry_after=telemetry,
    )


def gpu_report(
    problem_name: str,
    gpu_key: str,
    speed: float,
    *,
    witnessed: bool = True,
    log: str = "",
    flags: list[str] | None = None,
    status: Status = Status.PASSED,
    message: str = "",
) -> EvaluationReport:
    problem = get_problem(problem_name)
    shapes = (
        []
        if status is not Status.PASSED
        else [
            passed_shape(problem_name, gpu_key, shape.axes, shape.ranked, speed, witnessed)
            for shape in problem.shapes
        ]
    )
    ranked = [shape.sol.score for shape in shapes if shape.ranked and shape.sol]
    eligible = status is Status.PASSED and witnessed and not flags and bool(ranked)
    now = datetime.now(UTC).isoformat()
    return EvaluationReport(
        harness_version="web-test",
        problem=problem_name,
        problem_version=problem.version,
        language="python",
        mode="ranked",
        device=DeviceInfo(
            kind="cuda", name=get_gpu_spec(gpu_key).name, gpu_type=gpu_key, development_device=False
        ),
        status=status,
        message=message,
        shapes=shapes,
        problem_score=problem_score(ranked) if eligible else None,
        rank_eligible=eligible,
        witnessed=witnessed and status is Status.PASSED,
        flags=flags or [],
        started_at=now,
        finished_at=now,
        wall_seconds=12.0,
        log=log,
    )


def evaluate(evaluation: Evaluation, report: EvaluationReport) -> str:
    """Deliver ``report`` for ``evaluation`` as a runner would: started, then the result."""
    dispatch.record_started(
        JobStarted(
            job_id=str(evaluation.job_id),
            evaluation_id=evaluation.pk,
            runner=RUNNER,
            started_at=timezone.now().isoformat(),
        )
    )
    outcome = dispatch.store_result(JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk,
                                              runner=RUNNER, outcome="completed", report=report))
    # The site refreshes the rankings once the storing transaction commits; a test's transaction
    # never commits, so do it here (it only ever replaces a row with a strictly better result).
    refresh_rankings_for(evaluation)
    return outcome


def submit(
    user: Any, problem_name: str, gpu_key: str, *, public: bool = False, source: str = SOURCE
) -> Evaluation:
    """A saved submission with one queued ranked evaluation (not handed to any broker)."""
    from leaderboard.models import GpuType, Problem

    problem = Problem.objects.get(name=problem_name)
    submission = Submission.objects.create(user=user, problem=problem, problem_version=problem.version,
                                           language="python", source=source, public=public)
    return Evaluation.objects.create(
        submission=submission, gpu_type=GpuType.objects.get(key=gpu_key), mode="ranked"
    )


def ranked(user: Any, problem_name: str, gpu_key: str, speed: float, **options: Any) -> Evaluation:
    evaluation = submit(user, problem_name, gpu_key, public=options.pop("public", False))
    outcome = evaluate(evaluation, gpu_report(problem_name, gpu_key, speed, **options))
    assert outcome.startswith("stored"), outcome
    evaluation.refresh_from_db()
    return evaluation
