"""Quotas, computed from the evaluations themselves (no ledger to drift out of step).

Limits, all from settings:

- ``SOLBOARD_QUOTA_MAX_QUEUED``: a user's evaluations queued or running at once (all problems).
- ``SOLBOARD_QUOTA_DAILY_PER_PROBLEM`` (per GPU type overrides in
  ``SOLBOARD_QUOTA_DAILY_BY_GPU``): evaluations of one user per problem and GPU type per UTC day.
- ``SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY`` and ``SOLBOARD_QUOTA_TOKEN_GPU_SECONDS_PER_DAY`` (0: none):
  GPU-seconds (``leaderboard/gpu_time.py``) of a user's, and of one API token's, charged
  evaluations that ended in the current UTC day. A new submission is refused once the day's
  figure reached the limit (jobs still running count when they end: at most the queued limit's
  worth past it).

An evaluation is *charged* unless the user got it back: cancelled before it started, or ended by
an infrastructure fault (status ``error`` without an evaluator verdict: runner lost, attempts
spent, evaluator crashed). One that failed on its own merits (compile error, wrong answer,
timeout, rejected) stays charged. Because the count is read from the rows, a refund is simply
the row's new status, and an idempotent retry, which creates nothing, charges nothing.
Callers serialise a user's checks with ``lock_user`` so two requests cannot both take the last
unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from leaderboard import gpu_time
from leaderboard.api.errors import ApiError
from leaderboard.models import Evaluation, EvaluationStatus, GpuType, Problem

S = EvaluationStatus
#: The client backs off this long when its queued-jobs quota is full (a job typically ends by then).
QUEUED_RETRY_AFTER_S = 30

REFUNDED = Q(status=S.CANCELLED, started_at__isnull=True) | Q(status=S.ERROR, evaluator_status__isnull=True)


def max_queued() -> int:
    return int(settings.SOLBOARD_QUOTA_MAX_QUEUED)


def daily_limit(gpu_key: str) -> int:
    by_gpu: dict[str, int] = settings.SOLBOARD_QUOTA_DAILY_BY_GPU
    return int(by_gpu.get(gpu_key, settings.SOLBOARD_QUOTA_DAILY_PER_PROBLEM))


def day_bounds(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Start of the current UTC day and the next reset."""
    now = (now or timezone.now()).astimezone(UTC)
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def charged(user: Any) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(submission__user=user).exclude(REFUNDED)


def queued_now(user: Any) -> int:
    return Evaluation.objects.filter(submission__user=user, status__in=(S.QUEUED, S.RUNNING)).count()


def used_today(user: Any, problem: Problem | None = None) -> dict[tuple[str, str], int]:
    """(problem name, GPU key) -> charged evaluations created since the start of the UTC day."""
    start, _ = day_bounds()
    rows = charged(user).filter(queued_at__gte=start)
    if problem is not None:
        rows = rows.filter(submission__problem=problem)
    counts = rows.values("submission__problem__name", "gpu_type__key").annotate(n=Count("id"))
    return {(row["submission__problem__name"], row["gpu_type__key"]): row["n"] for row in counts}


@dataclass(frozen=True)
class Request:
    """What one submission (or re-run) would charge: one evaluation per GPU type."""

    problem: str
    gpu_types: tuple[str, ...]


def check(user: Any, requests: Iterable[Request], token: Any | None = None) -> None:
    """Raise 429 ``quota_exceeded`` if these new evaluations do not fit the user's quotas (and,
    made with an API token, the token's GPU time)."""
    requests = list(requests)
    wanted = sum(len(request.gpu_types) for request in requests)
    queued = queued_now(user)
    if queued + wanted > max_queued():
        raise _exceeded("queued", f"{queued} of your evaluations are queued or running; the limit is "
                        f"{max_queued()} at once (this request adds {wanted})", QUEUED_RETRY_AFTER_S,
                        used=queued, limit=max_queued())
    used = used_today(user)
    adding: dict[tuple[str, str], int] = {}
    for request in requests:
        for gpu in request.gpu_types:
            adding[(request.problem, gpu)] = adding.get((request.problem, gpu), 0) + 1
    for (problem, gpu), count in adding.items():
        limit, spent = daily_limit(gpu), used.get((problem, gpu), 0)
        if spent + count > limit:
            _, reset = day_bounds()
            wait = max(1, int((reset - timezone.now()).total_seconds()) + 1)
            raise _exceeded("daily", f"{spent} of {limit} evaluations of {problem} on {gpu} used today "
                            f"(UTC); the quota resets at {reset.isoformat()}", wait, used=spent, limit=limit,
                            problem=problem, gpu_type=gpu, resets_at=reset.isoformat())
    check_gpu_seconds(user, token)


def gpu_seconds_limits() -> tuple[float, float]:
    """(per user, per token) GPU-seconds per UTC day; 0 means no limit."""
    return (float(settings.SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY),
            float(settings.SOLBOARD_QUOTA_TOKEN_GPU_SECONDS_PER_DAY))


def gpu_seconds_today(owner: Q) -> float:
    """Charged GPU-seconds of what ``owner`` selects, ended since the start of the UTC day."""
    start, _ = day_bounds()
    return gpu_time.used(owner, since=start, exclude=REFUNDED)


def check_gpu_seconds(user: Any, token: Any | None) -> None:
    """Refuse once the user's, or the token's, GPU time of the day reached its limit."""
    per_user, per_token = gpu_seconds_limits()
    owners = [("gpu_seconds", gpu_time.of_user(user), per_user, "you")]
    if token is not None:
        owners.append(("token_gpu_seconds", gpu_time.of_token(token), per_token, f"token {token.prefix}…"))
    for kind, owner, limit, who in owners:
        if limit <= 0:
            continue
        spent = gpu_seconds_today(owner)
        if spent >= limit:
            _, reset = day_bounds()
            wait = max(1, int((reset - timezone.now()).total_seconds()) + 1)
            raise _exceeded(
                kind,
                f"{spent:.1f} of {limit:g} GPU-seconds used today (UTC) by {who}; the quota "
                f"resets at {reset.isoformat()}",
                wait,
                used=spent,
                limit=limit,
                resets_at=reset.isoformat(),
            )


def _exceeded(kind: str, message: str, retry_after: int, **details: Any) -> ApiError:
    return ApiError("quota_exceeded", message, None, headers={"Retry-After": str(retry_after)},
                    retry_after=retry_after, quota={"kind": kind, **details})


def lock_user(user: Any) -> None:
    """Serialise this user's quota checks until the surrounding transaction ends."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()


def gpu_seconds_summary(user: Any, token: Any | None) -> dict[str, Any]:
    """The GPU time of the caller (and of the token it used): today's (charged) against the
    limits, and the totals (everything its jobs used, refunded ones too)."""
    start, reset = day_bounds()
    per_user, per_token = gpu_seconds_limits()

    def part(owner: Q, limit: float) -> dict[str, Any]:
        today = gpu_seconds_today(owner)
        return {"used_today": today, "limit_per_day": limit or None,
                "left_today": max(0.0, round(limit - today, 3)) if limit else None,
                "total": gpu_time.used(owner), "total_today": gpu_time.used(owner, since=start)}

    body = {**part(gpu_time.of_user(user), per_user), "resets_at": reset.isoformat(),
            "definition": "the wall time each job held its GPUs, times the GPU count"}
    if token is not None:
        body["token"] = {"id": token.pk, "prefix": token.prefix, **part(gpu_time.of_token(token), per_token)}
    return body


def summary(user: Any, token: Any | None = None) -> dict[str, Any]:
    """The caller's quotas: used, left and when the daily ones reset."""
    _, reset = day_bounds()
    used = used_today(user)
    gpu_keys = list(GpuType.objects.values_list("key", flat=True))
    daily = [
        {"problem": problem, "gpu_type": gpu, "used": count, "limit": daily_limit(gpu),
         "left": max(0, daily_limit(gpu) - count)}
        for (problem, gpu), count in sorted(used.items())
    ]
    queued = queued_now(user)
    return {
        "queued": {"used": queued, "limit": max_queued(), "left": max(0, max_queued() - queued)},
        "daily_per_problem": {
            "default_limit": int(settings.SOLBOARD_QUOTA_DAILY_PER_PROBLEM),
            "limit_by_gpu_type": {key: daily_limit(key) for key in gpu_keys},
            "resets_at": reset.isoformat(),
            "used": daily,
        },
        "gpu_seconds": gpu_seconds_summary(user, token),
        "refunds": "cancelled before starting, or ended by an infrastructure fault (error without a verdict)",
    }
