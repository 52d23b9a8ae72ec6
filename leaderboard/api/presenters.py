"""Submissions and evaluations as the API shows them, with feedback an optimiser loop can act on.

Who sees what (leaderboard/audience.py): the owner (and staff) see the source, the launch spec, the messages,
tracebacks, compiler output and the submission's log; everyone else sees the status, an error kind, the
failing shape, the figures, and a report stripped of every free-text string (a traceback or a compiler
diagnostic quotes the source). A passed result that its witness has not confirmed is ``provisional``: shown,
never ranked; so is a running ranked job's report before its witness (``provisional_report``), which its final
result replaces. ``not_ranked_reason`` says exactly why a result is not in a ranking.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import datetime
from typing import Any

from evaluator.vocabulary import Status
from leaderboard.audience import (
    may_see_details,
    public_evidence,
    public_message,
    public_report,
    public_summary,
)
from leaderboard.models import Evaluation, EvaluationStatus, Mode, Problem, ShapeResult, Submission
from leaderboard.models.integrity import Withdrawal
from leaderboard.queues import availability, live_runners_by_queue, queue_position, unserved

S = EvaluationStatus
WAITING = (S.QUEUED, S.RUNNING)


def overall_status(statuses: list[str]) -> str:
    """running if any runs, queued if any waits, else finished."""
    if S.RUNNING in statuses:
        return "running"
    if S.QUEUED in statuses:
        return "queued"
    return "finished"


def state_token(evaluations: list[tuple[int, str]]) -> str:
    """A short fingerprint of (evaluation id, state) pairs (``evaluation_state``): it changes
    exactly when a status changes, a provisional result comes or an evaluation is added (a re-run).
    Long-poll clients send it back as ``since``."""
    text = ",".join(f"{pk}:{status}" for pk, status in sorted(evaluations))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def evaluation_state(status: str, provisional_at: datetime | None, started_at: datetime | None) -> str:
    """The status, and whether the running attempt has a provisional result (the same rule as
    ``Evaluation.current_provisional``, from the three columns a poller reads)."""
    current = (status == S.RUNNING and provisional_at is not None
               and (started_at is None or provisional_at >= started_at))
    return f"{status}+provisional" if current else status


def is_provisional(evaluation: Evaluation) -> bool:
    """A ranked result its witness has not confirmed. A test run has no witness to wait for: its
    result is final, and the report page calls it "a test run", not provisional."""
    report = evaluation.report or {}
    ranked_and_passed = evaluation.mode == Mode.RANKED and evaluation.status == S.PASSED
    return ranked_and_passed and not report.get("witnessed", False)


def not_ranked_reason(evaluation: Evaluation, private: bool = True) -> str | None:
    """None when the result is in its ranking; else the exact reason, first one that applies. Not
    ``private``: the report's own message is replaced by the public summary's words."""
    if evaluation.mode != Mode.RANKED:
        return "test mode is never ranked: submit with mode=ranked"
    if evaluation.current_provisional is not None:
        return "not finished (running): the provisional result is shown until its witness has run"
    if evaluation.status in WAITING:
        return f"not finished ({evaluation.status})"
    if evaluation.status != S.PASSED:
        return f"status {evaluation.status}" + (
            f" ({evaluation.evaluator_status})" if evaluation.evaluator_status else ""
        )
    withdrawal = withdrawal_of(evaluation)
    if withdrawal is not None:
        return (f"withdrawn from the rankings by an operator on {withdrawal.withdrawn_at:%Y-%m-%d}: "
                f"{withdrawal.note} (a re-run is the appeal)")
    if evaluation.rank_eligible and evaluation.score is not None:
        return None
    report = evaluation.report or {}
    if not report.get("witnessed", False):
        return "provisional: " + (
            _unwitnessed(report) or "not every shape's ranked median was confirmed by its witness"
        )
    if evaluation.flags:
        return "flagged for review: " + "; ".join(str(flag) for flag in evaluation.flags)
    return (report.get("message") if private else "") or "the evaluator did not mark the result rank-eligible"


def withdrawal_of(evaluation: Evaluation) -> Withdrawal | None:
    try:
        return evaluation.withdrawal  # type: ignore[no-any-return]
    except Withdrawal.DoesNotExist:
        return None


def _unwitnessed(report: dict[str, Any]) -> str:
    reasons = []
    for shape in report.get("shapes", []):
        witness = shape.get("witness")
        if shape.get("status") != Status.PASSED or (witness and witness.get("confirmed")):
            continue
        why = (witness or {}).get("message") or "no witness measurement"
        reasons.append(f"{shape.get('shape_id')}: {why}")
    return "; ".join(reasons[:5])


def shape_feedback(shape: dict[str, Any], stored: ShapeResult | None = None, counted: bool | None = None
                   ) -> dict[str, Any]:
    """One shape of a report, flattened: timing, baseline, SOL, bound, worst elements, ncu headline.

    ``stored``: the site's own row for a final result, whose figures are the ones the site computed
    and the report page shows (on the CPU development device the report has no SOL section: the
    score is the site's development score). ``counted``: whether the shape counts towards the
    problem score on this device (the ranked shapes on a GPU, the ``cpu`` shapes on the CPU)."""
    timing, baseline, sol = (
        shape.get("timing") or {},
        shape.get("baseline_timing") or {},
        shape.get("sol") or {},
    )
    row: dict[str, Any] = {
        "shape_id": shape.get("shape_id"), "ranked": shape.get("ranked") if counted is None else counted,
        "status": shape.get("status"),
        "message": shape.get("message", ""), "median_us": timing.get("median_us"),
        "ci95_us": [timing.get("ci95_low_us"), timing.get("ci95_high_us")] if timing else None,
        "baseline_median_us": baseline.get("median_us"), "t_sol_us": sol.get("t_sol_us"),
        "sol_fraction": sol.get("sol_fraction"), "bound": sol.get("bound"), "score": sol.get("score"),
        "speedup": sol.get("speedup"), "witnessed": bool((shape.get("witness") or {}).get("confirmed")),
        "worst_elements": _worst_elements(shape), "ncu": _ncu_headline(shape),
    }
    if stored is not None:
        row.update(median_us=stored.median_us, baseline_median_us=stored.baseline_median_us,
                   t_sol_us=stored.t_sol_us, sol_fraction=stored.sol_fraction, score=stored.score,
                   speedup=stored.speedup)
    return row


def _worst_elements(shape: dict[str, Any]) -> list[dict[str, Any]]:
    for check in shape.get("checks", []):
        if check.get("passed"):
            continue
        worst = [dict(item, trial=check.get("trial")) for stats in (check.get("errors") or {}).values()
                 for item in stats.get("worst", [])]
        if worst:
            return worst[:8]
    return []


def _ncu_headline(shape: dict[str, Any]) -> dict[str, Any] | None:
    profile = shape.get("profile") or {}
    kernels = profile.get("kernels") or []
    if not profile.get("available") or not kernels:
        return None
    top = kernels[0]
    keys = ("name", "duration_us", "sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct",
            "registers_per_thread")
    return {key: top.get(key) for key in keys}


def evaluation_label(evaluation: Evaluation) -> str:
    """How people see an evaluation: within its submission, never by its own id."""
    return (f"submission {evaluation.submission_id}, {evaluation.gpu_type.key} {evaluation.mode} "
            f"run {evaluation.run_number}")


def _final_shapes(evaluation: Evaluation, report: dict[str, Any]) -> list[dict[str, Any]]:
    """The final report's shapes with the site's stored figures (ShapeResult rows)."""
    development = evaluation.gpu_type.development_device
    rows = {row.shape.shape_id: row for row in evaluation.shape_results.all()}
    feedback = []
    for shape in report.get("shapes", []):
        stored = rows.get(shape.get("shape_id"))
        counted = None if stored is None else bool(stored.shape.cpu if development else stored.shape.ranked)
        feedback.append(shape_feedback(shape, stored, counted))
    return feedback


def evaluation_body(evaluation: Evaluation, private: bool, with_report: bool,
                    served: Counter[str] | None = None) -> dict[str, Any]:
    """One evaluation as a viewer sees it: ``private`` (owner, staff, a public submission) gets the
    messages, tracebacks and logs; anyone else the summary built from fixed words
    (leaderboard/audience.py)."""
    gpu = evaluation.gpu_type
    report, early = _seen(evaluation.report, private), _seen(evaluation.current_provisional, private)
    body: dict[str, Any] = {
        "id": evaluation.pk,
        "submission_id": evaluation.submission_id,
        "label": evaluation_label(evaluation),
        "gpu_type": gpu.key,
        "development_device": gpu.development_device,
        "mode": evaluation.mode,
        "run_number": evaluation.run_number,
        "status": evaluation.status,
        "evaluator_status": evaluation.evaluator_status,
        "message": _message(evaluation, private),
        **public_summary(
            evaluation.status, evaluation.evaluator_status, evaluation.message, evaluation.report
        ),
        "details": "shown" if private else "owner only",
        "queue_position": queue_position(evaluation),
        "runners_online": None,
        "queued_at": evaluation.queued_at,
        "started_at": evaluation.started_at,
        "finished_at": evaluation.finished_at,
        "score": evaluation.score,
        "rank_eligible": evaluation.rank_eligible,
        "provisional": is_provisional(evaluation),
        "not_ranked_reason": not_ranked_reason(evaluation, private),
        "features_met": evaluation.features_met,
        "flags": evaluation.flags,
    }
    if evaluation.status == S.QUEUED:
        body["runners_online"] = availability(
            gpu.key, evaluation.submission.problem.world_size, served
        ).runners
    body.update(provisional_at=evaluation.provisional_at if early else None,
                provisional_score=(early or {}).get("problem_score"))
    if early is not None:
        body["provisional"] = True
        body["shapes"] = [shape_feedback(shape) for shape in early.get("shapes", [])]
    else:
        body["shapes"] = _final_shapes(evaluation, report or {})
    if with_report:
        body["report"], body["provisional_report"] = report, early
    return body


def no_runner_warning(gpu_key: str) -> dict[str, Any]:
    return {"code": "no_runner", "gpu_type": gpu_key,
            "message": f"no runner for {gpu_key} is online: its evaluations stay queued until one connects "
                       f"(/runners/ lists the runners)"}


def runner_warnings(evaluations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One warning per GPU type whose queued evaluations no live runner serves."""
    unserved = [
        item["gpu_type"] for item in evaluations if item["status"] == S.QUEUED and item["runners_online"] == 0
    ]
    return [no_runner_warning(key) for key in dict.fromkeys(unserved)]


def availability_warnings(problem_name: str, gpu_keys: list[str]) -> list[dict[str, Any]]:
    """The same warnings before anything is queued (the dry run)."""
    problem = Problem.objects.filter(name=problem_name).only("world_size").first()
    if problem is None:
        return []
    return [no_runner_warning(found.gpu_type) for found in unserved(gpu_keys, problem.world_size)]


def _message(evaluation: Evaluation, private: bool) -> str:
    if private:
        return evaluation.message
    return public_message(
        evaluation.status, evaluation.evaluator_status, evaluation.message, evaluation.report
    )


def _seen(report: dict[str, Any] | None, private: bool) -> dict[str, Any] | None:
    """The report as this viewer may see it (``audience.public_report`` unless private)."""
    return report if private else public_report(report)


def agent_of(submission: Submission) -> dict[str, str] | None:
    origin = getattr(submission, "origin", None)
    if origin is None or not (origin.agent_name or origin.agent_model or origin.agent_version):
        return None
    return {"name": origin.agent_name, "model": origin.agent_model, "version": origin.agent_version}


def submission_body(submission: Submission, viewer: Any, with_report: bool = True) -> dict[str, Any]:
    private = may_see_details(viewer, submission)
    evaluations = list(submission.evaluations.select_related("gpu_type")
                       .prefetch_related("shape_results__shape").order_by("id"))
    served = live_runners_by_queue() if any(e.status == S.QUEUED for e in evaluations) else Counter()
    body: dict[str, Any] = {
        "id": submission.pk,
        "problem": submission.problem.name,
        "problem_version": submission.problem_version,
        "language": submission.language,
        "user": submission.user.get_username(),
        "agent": agent_of(submission),
        "created_at": submission.created_at,
        "source_sha256": submission.source_sha256,
        "status": overall_status([evaluation.status for evaluation in evaluations]),
        "state": state_token(
            [
                (
                    evaluation.pk,
                    evaluation_state(evaluation.status, evaluation.provisional_at, evaluation.started_at),
                )
                for evaluation in evaluations
            ]
        ),
        "static_evidence": submission.static_evidence
        if private
        else public_evidence(submission.static_evidence),
        "evaluations": [
            evaluation_body(evaluation, private, with_report, served) for evaluation in evaluations
        ],
    }
    body["warnings"] = runner_warnings(body["evaluations"])
    if private:
        body["source"], body["launch_spec"] = submission.source, submission.launch_spec
    return body


def submission_summary(submission: Submission) -> dict[str, Any]:
    """The list view's row: no source, no report."""
    evaluations = list(submission.evaluations.all())
    return {
        "id": submission.pk, "problem": submission.problem.name, "language": submission.language,
        "created_at": submission.created_at, "agent": agent_of(submission),
        "status": overall_status([evaluation.status for evaluation in evaluations]),
        "evaluations": [{"id": e.pk, "gpu_type": e.gpu_type.key, "mode": e.mode, "run_number": e.run_number,
                         "status": e.status, "score": e.score, "provisional": is_provisional(e)}
                        for e in sorted(evaluations, key=lambda e: e.pk)],
    }
