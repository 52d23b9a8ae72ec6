"""Storing a completed report: the site's verdict, its ShapeResults, its score (report_verdict.py); and a
provisional one (before the witness), kept aside and never ranked.

The report is stored as the site judged it: its SOL figures, problem score, eligibility and
``witnessed`` replaced by the site's own, so no stored copy carries a figure the site did not
compute. A refused report (report_verdict.Refused) ends as ``rejected`` with the reason, no score and no
shape rows; its measurements stay in the stored report for review.
"""

from __future__ import annotations

import math
from typing import Any

from django.utils import timezone

from evaluator.report import EvaluationReport, ShapeReport, Status
from leaderboard.dispatch.report_verdict import Judgement, Refused, judge
from leaderboard.models import Evaluation, EvaluationStatus, Shape, ShapeResult
from solboard_common.protocol import JobProvisional, JobResult

S = EvaluationStatus


def store_report(evaluation: Evaluation, result: JobResult) -> str:
    report = result.report
    assert report is not None
    problem = _mismatch(evaluation, report)
    if problem:
        done = evaluation.transition(S.ERROR, expected=(S.RUNNING,), message=problem, log=result.log)
        return "stored error" if done else "ignored: status changed meanwhile"
    shapes = {shape.shape_id: shape for shape in Shape.objects.filter(problem=evaluation.submission.problem)}
    try:
        judgement = judge(evaluation, report, shapes)
    except Refused as refusal:
        return _store_refusal(evaluation, result, str(refusal))
    as_judged = _as_judged(report, judgement)
    done = evaluation.transition(
        judgement.verdict,
        expected=(S.RUNNING,),
        evaluator_status=report.status.value,
        message=report.message[:10000],
        report=json_safe(as_judged.model_dump(mode="json")),
        log=(report.log or result.log),
        score=judgement.score,
        rank_eligible=judgement.rank_eligible,
        flags=report.flags,
        features_met=features_met(report),
        provisional_report=None,
    )
    if not done:
        return "ignored: status changed meanwhile"
    _store_shapes(evaluation, as_judged, shapes, judgement)
    return f"stored {judgement.verdict}"


def store_provisional_report(evaluation: Evaluation, message: JobProvisional) -> str:
    """A running ranked job's report before its witness, judged like any report (the site's own
    figures; a refused one is dropped: the final result will say what it says) and kept beside the
    evaluation: never in ``report``, ``score`` or the ShapeResults, so it can rank nothing."""
    report = message.report
    problem = _mismatch(evaluation, report)
    if problem:
        return f"ignored: {problem}"
    shapes = {shape.shape_id: shape for shape in Shape.objects.filter(problem=evaluation.submission.problem)}
    try:
        judgement = judge(evaluation, report, shapes)
    except Refused as refusal:
        return f"ignored: the site refuses it: {refusal}"
    judgement.witnessed = judgement.rank_eligible = False  # nothing is witnessed yet
    as_judged = _as_judged(report, judgement)
    stored = Evaluation.objects.filter(pk=evaluation.pk, status=S.RUNNING, job_id=evaluation.job_id).update(
        provisional_report=json_safe(as_judged.model_dump(mode="json")), provisional_at=timezone.now())
    return "stored provisional" if stored else "ignored: status changed meanwhile"


def _store_refusal(evaluation: Evaluation, result: JobResult, why: str) -> str:
    report = result.report
    assert report is not None
    shapes = [item.model_copy(update={"sol": None}) for item in report.shapes]
    refused = report.model_copy(update={"shapes": shapes, "problem_score": None, "rank_eligible": False,
                                        "witnessed": False})
    done = evaluation.transition(
        S.REJECTED,
        expected=(S.RUNNING,),
        evaluator_status=Status.REJECTED.value,
        message=f"the site refused the runner's report: {why}"[:10000],
        report=json_safe(refused.model_dump(mode="json")),
        log=(report.log or result.log),
        score=None,
        rank_eligible=False,
        flags=report.flags,
        provisional_report=None,
    )
    return "stored rejected" if done else "ignored: status changed meanwhile"


def _mismatch(evaluation: Evaluation, report: EvaluationReport) -> str:
    """A report must be about this evaluation's problem (and version), mode, language, GPU type."""
    submission = evaluation.submission
    expected = (submission.problem.name, evaluation.mode, submission.language, evaluation.gpu_type.key)
    got = (report.problem, report.mode, report.language, report.device.gpu_type)
    if expected != got or report.problem_version != submission.problem_version:
        return (f"the runner's report is for {'/'.join(got)} (v{report.problem_version}), "
                f"not {'/'.join(expected)} (v{submission.problem_version})")
    return ""


def features_met(report: EvaluationReport) -> bool | None:
    """Whether the evidence shows every feature the problem requires on this target.

    None when there is nothing to judge: no evidence (Python) or nothing required here."""
    evidence = report.evidence
    if evidence is None or not evidence.required:
        return None
    return not evidence.missing


def _as_judged(report: EvaluationReport, judgement: Judgement) -> EvaluationReport:
    shapes = [
        item.model_copy(
            update={
                "sol": judgement.figures.get(item.shape_id),
                "ranked_time": judgement.ranked.get(item.shape_id),
            }
        )
        for item in report.shapes
    ]
    return report.model_copy(
        update={
            "shapes": shapes,
            "problem_score": judgement.score,
            "rank_eligible": judgement.rank_eligible,
            "witnessed": judgement.witnessed,
        }
    )


def _store_shapes(evaluation: Evaluation, report: EvaluationReport, shapes: dict[str, Shape],
                  judgement: Judgement) -> None:
    """One row per shape, replacing any earlier rows of this evaluation (idempotent)."""
    rows = [_shape_row(evaluation, shapes[item.shape_id], item, judgement)
            for item in report.shapes if item.shape_id in shapes]
    ShapeResult.objects.filter(evaluation=evaluation).delete()
    ShapeResult.objects.bulk_create(rows)


def _shape_row(evaluation: Evaluation, shape: Shape, item: ShapeReport, judgement: Judgement) -> ShapeResult:
    timing, baseline, sol, ranked = item.timing, item.baseline_timing, item.sol, item.ranked_time
    row = ShapeResult(
        evaluation=evaluation,
        shape=shape,
        status=item.status.value,
        correct=item.status is Status.PASSED,
        message=item.message[:10000],
        checks=json_safe([check.model_dump(mode="json") for check in item.checks]),
        errors=json_safe(
            {
                check.trial: {k: v.model_dump(mode="json") for k, v in check.errors.items()}
                for check in item.checks
                if not check.passed
            }
        ),
        telemetry={"before": _dump(item.telemetry_before), "after": _dump(item.telemetry_after)},
        profile=_dump(item.profile),
    )
    if timing is not None:
        row.median_us, row.mean_us, row.min_us, row.max_us = (
            timing.median_us,
            timing.mean_us,
            timing.min_us,
            timing.max_us,
        )
        row.std_us, row.n, row.timing_method = timing.std_us, timing.n, timing.method
        row.ci95_low_us, row.ci95_high_us = timing.ci95_low_us, timing.ci95_high_us
    if baseline is not None:
        row.baseline_median_us = baseline.median_us
    if ranked is not None:  # the per-shape rankings order by median_us: the site's ranked time, never a claim
        row.median_us, row.baseline_median_us = ranked.kernel_us, ranked.baseline_us
    if sol is not None:  # the site's figures (_as_judged), never the runner's
        row.t_sol_us, row.sol_fraction, row.score = sol.t_sol_us, sol.sol_fraction, sol.score
        row.speedup, row.tflops, row.gbps = sol.speedup, sol.tflops, sol.gbps
    elif item.shape_id in judgement.development_scores and ranked is not None:
        row.score = judgement.development_scores[item.shape_id]
        row.speedup = ranked.baseline_us / ranked.kernel_us
    return row


def _dump(model: object) -> Any:
    return None if model is None else json_safe(model.model_dump(mode="json"))  # type: ignore[attr-defined]


def json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers and PostgreSQL's json type refuses
    them, so a report carrying one would fail to store (and its message would be lost)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value
