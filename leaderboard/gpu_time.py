"""GPU time: what each job used, and each user's and each API token's totals (issue 36).

**Definition.** An evaluation's GPU-seconds are the wall time its job held its GPUs, times the
number of GPUs it ran on (the problem's world size). The runner measures the hold
(``JobResult.gpu_hold_seconds``: its GPU locks taken -> the GPU check after the job found them
free; so the job's start, its run and its clean-up, not the idle time of a warm spare). The site
stores no figure as a runner claims it: it bounds the hold by its own clock, from the job's start
(its ``job_started`` message; the hand-over to the broker when that message was lost) to the
result's arrival, and uses that wall time itself when the runner sent no usable figure.

Recorded for every result that ends an evaluation (whatever its verdict) and for the late result
of a running job its owner cancelled. A result that requeues the evaluation (a runner's fault)
records nothing: that attempt is the platform's cost. Totals sum the stored figures; the daily
quota (``leaderboard/api/quotas.py``) counts the evaluations a user is charged for, by the UTC day
they ended in.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.db.models import Q, Sum
from django.utils import timezone

from leaderboard.models import Evaluation, EvaluationStatus
from solboard_common.protocol import JobResult


def job_began(evaluation: Evaluation) -> datetime | None:
    """When the site saw the job start (``job_started``), else when it handed it to the broker:
    read before a result changes the row (a lost ``job_started`` makes the result start it now)."""
    return evaluation.started_at or evaluation.enqueued_at


def seconds_used(
    evaluation: Evaluation, result: JobResult, began: datetime | None, now: datetime
) -> float | None:
    """The GPU-seconds to store for ``evaluation`` ended by ``result``, or None when the site has no
    clock to bound them by (never handed over: nothing ran)."""
    if began is None:
        return None
    wall = max((now - began).total_seconds(), 0.0)
    held = result.gpu_hold_seconds
    if held is None or not math.isfinite(held) or held < 0:
        held = wall
    return round(min(held, wall) * max(int(evaluation.submission.problem.world_size), 1), 3)


def record(evaluation: Evaluation, result: JobResult, began: datetime | None) -> float | None:
    """Store the job's GPU-seconds once (a figure already there stays)."""
    seconds = seconds_used(evaluation, result, began, timezone.now())
    if seconds is not None:
        Evaluation.objects.filter(pk=evaluation.pk, gpu_seconds__isnull=True).update(gpu_seconds=seconds)
    return seconds


def record_after_cancel(evaluation: Evaluation, result: JobResult) -> str:
    """A running job its owner cancelled still used the GPU until its runner killed it: the
    runner's result for that very job (its job id, from the runner that ran it) gives the figure."""
    runner = evaluation.runner.name if evaluation.runner is not None else None
    if (
        evaluation.status != EvaluationStatus.CANCELLED
        or evaluation.started_at is None
        or str(evaluation.job_id) != result.job_id
        or runner != result.runner
        or evaluation.gpu_seconds is not None
    ):
        return ""
    record(evaluation, result, evaluation.started_at)
    return "; GPU time recorded"


def of_user(user: Any) -> Q:
    return Q(submission__user=user)


def of_token(token: Any) -> Q:
    return Q(submission__origin__token=token)


def used(owner: Q, since: datetime | None = None, exclude: Q | None = None) -> float:
    """GPU-seconds of the evaluations ``owner`` selects (ended since ``since``, less ``exclude``)."""
    rows = Evaluation.objects.filter(owner, gpu_seconds__isnull=False)
    if since is not None:
        rows = rows.filter(finished_at__gte=since)
    if exclude is not None:
        rows = rows.exclude(exclude)
    return round(float(rows.aggregate(total=Sum("gpu_seconds"))["total"] or 0.0), 3)


def totals(owner: Q, day_start: datetime) -> dict[str, float]:
    """All-time and today's GPU-seconds of what ``owner`` selects (the API's and pages' figures)."""
    return {"total": used(owner), "today": used(owner, since=day_start)}


def token_totals(token_ids: list[int], day_start: datetime) -> dict[int, dict[str, float]]:
    """All-time and today's GPU-seconds per token, in one query for a list of tokens."""
    rows = (
        Evaluation.objects.filter(submission__origin__token_id__in=token_ids, gpu_seconds__isnull=False)
        .values("submission__origin__token_id")
        .annotate(total=Sum("gpu_seconds"), today=Sum("gpu_seconds", filter=Q(finished_at__gte=day_start)))
    )
    found = {row["submission__origin__token_id"]: row for row in rows}
    return {token_id: {"total": round(float((found.get(token_id) or {}).get("total") or 0.0), 3),
                       "today": round(float((found.get(token_id) or {}).get("today") or 0.0), 3)}
            for token_id in token_ids}
