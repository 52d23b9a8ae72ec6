"""The submission report, read side: per evaluation its live state, per-shape figures, roofline,
profile, evidence, telemetry and the reason it is not ranked.

Everything comes from what the site stored (Evaluation, ShapeResult, the report JSON): the page
recomputes nothing that decides a rank. A fixed number of queries whatever the size of the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from evaluator.ptx.feature_evidence import missing_reason
from evaluator.report import FeatureEvidence
from leaderboard.audience import (
    may_see_details,
    public_evidence,
    public_message,
    public_reason,
    public_report,
    public_shape_message,
)
from leaderboard.dispatch.enqueue import max_inflight_per_user
from leaderboard.models import (
    TERMINAL_STATUSES,
    Evaluation,
    EvaluationStatus,
    Mode,
    RunnerNode,
    ShapeResult,
    Submission,
    is_reference_submission,
)
from leaderboard.queues import availability, queue_position
from leaderboard.ranking_maintenance import meets_features
from leaderboard.web.agents import agent_label
from leaderboard.web.charts import Chart, RooflinePoint, roofline_chart
from leaderboard.web.sol import counts_of

S = EvaluationStatus
#: Recent finished runs per GPU type whose median duration estimates a queued run's wait.
WAIT_SAMPLE = 20


def visible_source(submission: Submission, user: Any) -> bool:
    """The source (and what echoes it: logs, compiler output, tracebacks) is its owner's until made
    public (leaderboard/audience.py). Staff see it too: operators review suspected cheating."""
    return may_see_details(user, submission)


def may_act(submission: Submission, user: Any) -> bool:
    return user.is_authenticated and (user.is_staff or user.pk == submission.user_id)


def load_submission(pk: int) -> Submission | None:
    """The submission with its origin (agent), evaluations (GPU types, runners, withdrawals) and shape
    results: 3 queries."""
    shape_results = Prefetch("shape_results", queryset=ShapeResult.objects.select_related("shape"))
    evaluations = Prefetch(
        "evaluations",
        queryset=Evaluation.objects.select_related("gpu_type", "runner", "withdrawal")
        .prefetch_related(shape_results)
        .order_by("gpu_type__key", "mode", "-run_number"),
    )
    return (Submission.objects.select_related("problem", "user", "origin").prefetch_related(evaluations)
            .filter(pk=pk).first())


# ---------------------------------------------------------------- not ranked: why


def not_ranked_reason(evaluation: Evaluation, details: bool = True) -> str:
    """The precise reason a finished evaluation is not on the rankings ('' when it is eligible);
    without ``details`` a failure's message is the public summary's words."""
    withdrawal = getattr(evaluation, "withdrawal", None)
    if withdrawal is not None:
        return (
            f"withdrawn from the rankings by an operator on {withdrawal.withdrawn_at:%Y-%m-%d %H:%M} UTC: "
            f"{withdrawal.note} (the owner may appeal with a re-run)"
        )
    if is_reference_submission(evaluation.submission):
        return "a reference line (measured like a submission, shown beside the rankings, never ranked)"
    if evaluation.rank_eligible and evaluation.status == S.PASSED:
        return ""
    report = evaluation.report or {}
    reasons = [
        (evaluation.mode == Mode.TEST, "a test run: only ranked mode ranks (re-submit in ranked mode)"),
        (evaluation.status != S.PASSED, _failure_reason(evaluation, details)),
        (bool(evaluation.flags), "flagged for review: " + "; ".join(str(flag) for flag in evaluation.flags)),
        (not report.get("witnessed", False) and not evaluation.gpu_type.development_device,
         "provisional: the timing has not been confirmed by a witness yet"),
        (evaluation.score is None, "no score: not every ranked shape passed with speed-of-light figures"),
    ]
    for applies, reason in reasons:
        if applies:
            return reason
    return "not eligible according to the evaluator's report"


def _failure_reason(evaluation: Evaluation, details: bool) -> str:
    words = {S.FAILED: "incorrect", S.ERROR: "did not compile or run", S.TIMEOUT: "ran out of time",
             S.REJECTED: "rejected by an anti-cheat check", S.CANCELLED: "cancelled"}
    what = words.get(evaluation.status, evaluation.status)  # type: ignore[call-overload]
    detail = evaluation.evaluator_status or ""
    text = evaluation.message if details else _public_reason(evaluation)
    message = text.strip().splitlines()[0] if text.strip() else ""
    return f"{what}{f' ({detail})' if detail else ''}{f': {message}' if message else ''}"


def features_note(evaluation: Evaluation, submission: Submission) -> str:
    """Whether it counts on the required-features ranking of its GPU type."""
    problem, gpu = submission.problem, evaluation.gpu_type
    required = problem.required_features.get(gpu.arch or "", [])
    if not required:
        return ""
    if meets_features(problem, gpu, evaluation.features_met):
        return f"uses the required features ({', '.join(required)}): on the required-features ranking"
    note = (
        f"does not show the required features ({', '.join(required)}): not on the required-features ranking"
    )
    evidence = (evaluation.report or {}).get("evidence")
    if not evidence:
        return note + " (no architecture evidence: only PTX/CUDA submissions carry it)"
    return f"{note}: {missing_reason(FeatureEvidence.model_validate(evidence))}"


# ---------------------------------------------------------------- live state


@dataclass
class LiveState:
    stage: str
    position: int | None = None
    estimated_wait: timedelta | None = None
    running_for: timedelta | None = None
    #: The running job's provisional result (ranked stage done, witness running), as judged.
    provisional: dict[str, Any] | None = None
    #: Queued, and no live runner serves its queue: the sentence that says so ('' otherwise).
    no_runner: str = ""


def live_state(evaluation: Evaluation) -> LiveState | None:
    """Where a queued or running evaluation is; None once it has ended."""
    if evaluation.status in TERMINAL_STATUSES:
        return None
    now = timezone.now()
    if evaluation.status == S.RUNNING:
        runner = evaluation.runner.name if evaluation.runner else "a runner"
        return LiveState(f"running on {runner}", running_for=now - (evaluation.started_at or now),
                         provisional=evaluation.current_provisional)
    position = queue_position(evaluation) or 1
    stage = (
        "handed to the runners' queue"
        if evaluation.enqueued_at
        else f"waiting on the site: at most {max_inflight_per_user()} of your evaluations per GPU type "
        "run at once"
    )
    served = availability(evaluation.gpu_type.key, evaluation.submission.problem.world_size)
    return LiveState(
        stage,
        position=position,
        estimated_wait=_estimated_wait(evaluation, position) if served.served else None,
        no_runner=served.warning(),
    )


def _estimated_wait(evaluation: Evaluation, position: int) -> timedelta | None:
    recent = list(Evaluation.objects.filter(gpu_type=evaluation.gpu_type, started_at__isnull=False,
                                            finished_at__isnull=False)
                  .order_by("-finished_at").values_list("started_at", "finished_at")[:WAIT_SAMPLE])
    if not recent:
        return None
    typical = statistics.median((end - start).total_seconds() for start, end in recent)
    cutoff = timezone.now() - timedelta(seconds=settings.SOLBOARD_RUNNER_STALE_SECONDS)
    runners = RunnerNode.objects.filter(gpu_type=evaluation.gpu_type, last_heartbeat__gte=cutoff).count()
    return timedelta(seconds=typical * position / max(runners, 1))


# ---------------------------------------------------------------- per shape


def _public_text(evaluation: Evaluation) -> str:
    return public_message(
        evaluation.status, evaluation.evaluator_status, evaluation.message, evaluation.report
    )


def _public_reason(evaluation: Evaluation) -> str:
    return public_reason(
        evaluation.status, evaluation.evaluator_status, evaluation.message, evaluation.report
    )


@dataclass
class ShapeView:
    result: ShapeResult
    #: The shape's message and profile as this viewer may see them (audience.py).
    message: str = ""
    profile: dict[str, Any] | None = None
    bound: str | None = None
    witness: dict[str, Any] | None = None
    worst: list[dict[str, Any]] = field(default_factory=list)
    intensity: float | None = None
    #: Multi-GPU problems: each rank's median (us). SOL against the ceilings the runner measured
    #: (the site computes it from the runner's heartbeat calibration; shown beside the datasheet
    #: fraction, never scored).
    rank_medians_us: list[float] = field(default_factory=list)
    sol_fraction_calibrated: float | None = None


def shape_views(evaluation: Evaluation, details: bool = True) -> list[ShapeView]:
    """Each shape result with what only the report JSON holds (bound, witness) and its worst elements;
    without ``details`` its message and profile lose every free-text string (audience.py)."""
    reported = {item.get("shape_id"): item for item in (evaluation.report or {}).get("shapes", [])}
    views = []
    for result in evaluation.shape_results.all():
        item = reported.get(result.shape.shape_id, {})
        counts = counts_of(result.shape)
        sol, timing = item.get("sol") or {}, item.get("timing") or {}
        message = result.message if details else public_shape_message(result.status, result.message)
        profile = (
            result.profile if details else (public_report({"profile": result.profile}) or {}).get("profile")
        )
        views.append(ShapeView(
            result, message, profile, bound=sol.get("bound"), witness=item.get("witness"),
            worst=_worst_elements(result.errors),
            intensity=counts.total_flops / counts.bytes if counts.bytes else None,
            rank_medians_us=[float(value) for value in timing.get("rank_median_us") or []
                             if isinstance(value, (int, float))],
            sol_fraction_calibrated=_number_or_none(sol.get("sol_fraction_attainable")),
        ))
    return views


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _worst_elements(errors: dict[str, Any]) -> list[dict[str, Any]]:
    """The few worst elements over every failed trial and output, worst first."""
    found = []
    for trial, outputs in (errors or {}).items():
        for output, stats in (outputs or {}).items():
            for element in (stats or {}).get("worst", []):
                found.append({"trial": trial, "output": output, **element})
    return sorted(found, key=lambda e: -(e.get("abs_error") or float("inf")))[:5]


def roofline(evaluation: Evaluation, views: list[ShapeView]) -> Chart | None:
    """The shapes under the GPU's roofs; the compute roof is the peak of the problem's main flop class."""
    gpu = evaluation.gpu_type
    if gpu.development_device or not gpu.hbm_bytes_per_s:
        return None
    classes: dict[str, float] = {}
    for view in views:
        for flop_class, flops in counts_of(view.result.shape).flops.items():
            classes[flop_class] = classes.get(flop_class, 0.0) + flops
    main_class = max(classes, key=lambda name: classes[name]) if classes else None
    peak = float(gpu.peaks.get(main_class, 0.0)) if main_class else 0.0
    points = [RooflinePoint(view.result.shape.shape_id, view.intensity, view.result.tflops)
              for view in views if view.intensity and view.result.tflops]
    return roofline_chart(points, peak, gpu.hbm_bytes_per_s / 1e12)


@dataclass
class EvaluationView:
    evaluation: Evaluation
    live: LiveState | None
    shapes: list[ShapeView]
    roofline: Chart | None
    not_ranked: str
    features: str
    report: dict[str, Any]
    #: While running: the provisional report (before the witness), shown until the final one comes.
    provisional: dict[str, Any] | None = None
    #: The evaluation's message as this viewer may see it (audience.py).
    message: str = ""


def evaluation_view(evaluation: Evaluation, submission: Submission, details: bool = True) -> EvaluationView:
    """``details``: the viewer may read messages, tracebacks and logs (``visible_source``)."""
    views = shape_views(evaluation, details)
    report, early = evaluation.report or {}, evaluation.current_provisional
    return EvaluationView(
        evaluation,
        live_state(evaluation),
        views,
        roofline(evaluation, views),
        not_ranked_reason(evaluation, details) if evaluation.is_terminal else "",
        features_note(evaluation, submission),
        report if details else public_report(report) or {},
        early if details else public_report(early),
        evaluation.message if details else _public_text(evaluation),
    )


def provisional_ids(evaluations: Iterable[Evaluation]) -> str:
    """Which evaluations show a provisional result now (the live status block reloads the page when
    this changes, so the provisional table appears without waiting for the final result)."""
    return ",".join(
        str(evaluation.pk) for evaluation in evaluations if evaluation.current_provisional is not None
    )


def static_kernels(submission: Submission, details: bool = True) -> list[dict[str, Any]]:
    """ptxas's registers, spills and shared memory per target and kernel (PTX/CUDA uploads); the
    kernels' names (the source's) only with ``details``."""
    rows = []
    evidence = submission.static_evidence if details else public_evidence(submission.static_evidence)
    for arch, found in (evidence or {}).get("archs", {}).items():
        for kernel in found.get("kernels", []):
            rows.append({"arch": arch, **kernel})
    return rows


def agent_of(submission: Submission) -> str:
    """The agent that made it (``load_submission`` fetched the origin), or ''."""
    origin = getattr(submission, "origin", None)
    return agent_label(origin.agent_name, origin.agent_model, origin.agent_version) if origin else ""
