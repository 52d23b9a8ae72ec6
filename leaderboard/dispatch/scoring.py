"""Storing a completed report: the evaluation's verdict, its ShapeResults, its score.

On a GPU the score and rank eligibility are the evaluator's (geomean of S over ranked shapes).
The CPU development device has no speed of light, so its score is the geometric mean over the
shapes it ran of S with t_SOL = 0, i.e. t_b / (t_b + t_k): 0.5 = as fast as the baseline. That
score only ever feeds the development ranking (GPU type ``cpu``), never a GPU ranking.
"""

from __future__ import annotations

import math

from evaluator.report import EvaluationReport, ShapeReport, Status
from leaderboard.models import Evaluation, EvaluationStatus, Shape, ShapeResult
from runners.protocol import JobResult

S = EvaluationStatus


def store_report(evaluation: Evaluation, result: JobResult) -> str:
    report = result.report
    assert report is not None
    problem = _mismatch(evaluation, report)
    if problem:
        done = evaluation.transition(S.ERROR, expected=(S.RUNNING,), message=problem, log=result.log)
        return "stored error" if done else "ignored: status changed meanwhile"
    score, eligible = score_of(evaluation, report)
    done = evaluation.transition(
        report.status.verdict, expected=(S.RUNNING,), evaluator_status=report.status.value,
        message=report.message[:10000], report=report.model_dump(mode="json"), log=(report.log or result.log),
        score=score, rank_eligible=eligible, flags=report.flags, features_met=features_met(report),
    )
    if not done:
        return "ignored: status changed meanwhile"
    _store_shapes(evaluation, report)
    return f"stored {report.status.verdict}"


def _mismatch(evaluation: Evaluation, report: EvaluationReport) -> str:
    """A report must be about this evaluation's problem, mode, language and GPU type."""
    submission = evaluation.submission
    expected = (submission.problem.name, evaluation.mode, submission.language, evaluation.gpu_type.key)
    got = (report.problem, report.mode, report.language, report.device.gpu_type)
    if expected != got:
        return f"the runner's report is for {'/'.join(got)}, not {'/'.join(expected)}"
    return ""


def features_met(report: EvaluationReport) -> bool | None:
    """Whether the evidence shows every feature the problem requires on this target.

    None when there is nothing to judge: no evidence (Python) or nothing required here."""
    evidence = report.evidence
    if evidence is None or not evidence.required:
        return None
    return not evidence.missing


def score_of(evaluation: Evaluation, report: EvaluationReport) -> tuple[float | None, bool]:
    if not evaluation.gpu_type.development_device:
        return report.problem_score, bool(report.rank_eligible and report.problem_score is not None)
    if report.mode != "ranked" or report.status is not Status.PASSED:
        return None, False
    scores = [development_score(shape) for shape in report.shapes]
    if not scores or any(value is None for value in scores):
        return None, False
    return geometric_mean([value for value in scores if value is not None]), True


def development_score(shape: ShapeReport) -> float | None:
    """S with t_SOL = 0: t_b / (t_b + t_k)."""
    if shape.status is not Status.PASSED or shape.timing is None or shape.baseline_timing is None:
        return None
    t_k, t_b = shape.timing.median_us, shape.baseline_timing.median_us
    if t_k <= 0 or t_b <= 0:
        return None
    return t_b / (t_b + t_k)


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


def _store_shapes(evaluation: Evaluation, report: EvaluationReport) -> None:
    """One row per shape, replacing any earlier rows of this evaluation (idempotent)."""
    shapes = {shape.shape_id: shape for shape in Shape.objects.filter(problem=evaluation.submission.problem)}
    rows = [_shape_row(evaluation, shapes[item.shape_id], item, evaluation.gpu_type.development_device)
            for item in report.shapes if item.shape_id in shapes]
    ShapeResult.objects.filter(evaluation=evaluation).delete()
    ShapeResult.objects.bulk_create(rows)


def _shape_row(evaluation: Evaluation, shape: Shape, item: ShapeReport, development: bool) -> ShapeResult:
    timing, baseline, sol = item.timing, item.baseline_timing, item.sol
    row = ShapeResult(
        evaluation=evaluation, shape=shape, status=item.status.value, correct=item.status is Status.PASSED,
        message=item.message[:10000], checks=[check.model_dump(mode="json") for check in item.checks],
        errors={check.trial: {k: v.model_dump(mode="json") for k, v in check.errors.items()}
                for check in item.checks if not check.passed},
        telemetry={"before": _dump(item.telemetry_before), "after": _dump(item.telemetry_after)},
        profile=_dump(item.profile),
    )
    if timing is not None:
        row.median_us, row.mean_us, row.min_us, row.max_us = timing.median_us, timing.mean_us, timing.min_us, timing.max_us
        row.std_us, row.n, row.timing_method = timing.std_us, timing.n, timing.method
        row.ci95_low_us, row.ci95_high_us = timing.ci95_low_us, timing.ci95_high_us
    if baseline is not None:
        row.baseline_median_us = baseline.median_us
    if sol is not None:
        row.t_sol_us, row.sol_fraction, row.score = sol.t_sol_us, sol.sol_fraction, sol.score
        row.speedup, row.tflops, row.gbps = sol.speedup, sol.tflops, sol.gbps
    elif development:
        row.score = development_score(item)
        if timing is not None and baseline is not None:
            row.speedup = baseline.median_us / timing.median_us
    return row


def _dump(model: object) -> dict[str, object] | None:
    return None if model is None else model.model_dump(mode="json")  # type: ignore[attr-defined]
