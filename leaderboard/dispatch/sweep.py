"""The sweeper: nothing saved and never queued, nothing running on a runner that is gone.

Runs from ``manage.py sweep`` (once, or ``--loop``), from the ``leaderboard.sweep`` task, and
piggy-backs on heartbeats (at most once per ``SOLBOARD_SWEEP_SECONDS`` per site process), so
``make run`` needs no beat process.

1. Evaluations saved but never handed to the broker (enqueued_at null: the on-commit send was
   lost, or they were waiting behind their user's in-flight limit) are released.
2. Running evaluations whose runner stopped heartbeating, or whose runner's heartbeats say it is
   running something else, are requeued on a fresh job id (attempts + 1), or end as ERROR once
   their attempts are spent.
3. Evaluations handed to the broker longer ago than the broker's visibility timeout (plus a
   margin) and still not started get a fresh job id and are handed over again: the message may
   have been lost with a broker that crashed. A late copy of the old one is answered with a cancel.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from leaderboard.dispatch.enqueue import release_pending
from leaderboard.dispatch.inbox import purge_nonces
from leaderboard.dispatch.messages import requeue_or_fail
from leaderboard.models import Evaluation, EvaluationStatus

log = logging.getLogger(__name__)
S = EvaluationStatus
_last_sweep = 0.0


@dataclass
class SweepReport:
    released: int = 0
    requeued: int = 0
    failed: int = 0


def stale_after() -> timedelta:
    return timedelta(seconds=settings.SOLBOARD_RUNNER_STALE_SECONDS)


def lost_running() -> list[Evaluation]:
    """Running evaluations whose runner is gone, or alive but busy with something else."""
    stale = timezone.now() - stale_after()
    gone = (
        Q(runner__isnull=True) | Q(runner__last_heartbeat__isnull=True) | Q(runner__last_heartbeat__lt=stale)
    )
    running = (Evaluation.objects.filter(status=S.RUNNING, started_at__lt=stale)
               .select_related("submission", "runner", "gpu_type"))
    alive = running.filter(runner__isnull=False, runner__last_heartbeat__gte=stale)
    return list(running.filter(gone)) + [evaluation for evaluation in alive if _reports_other_job(evaluation)]


def _reports_other_job(evaluation: Evaluation) -> bool:
    """Only once a heartbeat came well after the job started (its own first heartbeat has had
    time to arrive) does "reports another job" mean the job is gone."""
    runner = evaluation.runner
    if runner is None or runner.last_heartbeat is None or evaluation.started_at is None:
        return False
    if runner.last_heartbeat <= evaluation.started_at + stale_after():
        return False
    return runner.current_job_id != str(evaluation.job_id)


def broker_wait_max() -> timedelta:
    return timedelta(seconds=settings.SOLBOARD_BROKER_WAIT_MAX_SECONDS)


def forget_old_handovers() -> int:
    """Queued in the broker for too long: draw a new job id and let release_pending resend it."""
    cutoff = timezone.now() - broker_wait_max()
    forgotten = 0
    for pk, job_id in Evaluation.objects.filter(status=S.QUEUED, enqueued_at__lt=cutoff).values_list(
        "pk", "job_id"
    ):
        forgotten += Evaluation.objects.filter(pk=pk, status=S.QUEUED, job_id=job_id).update(
            job_id=uuid.uuid4(), enqueued_at=None, message="handed to the broker again: not started in time")
    return forgotten


def sweep() -> SweepReport:
    report = SweepReport()
    forget_old_handovers()
    for evaluation in lost_running():
        why = _why_lost(evaluation)
        with transaction.atomic():
            outcome = requeue_or_fail(evaluation, why)
        log.warning("evaluation %s: %s -> %s", evaluation.pk, why, outcome)
        report.requeued += outcome == "requeued"
        report.failed += outcome == "stored error"
    report.released = release_pending()
    purge_nonces()
    return report


def _why_lost(evaluation: Evaluation) -> str:
    runner = evaluation.runner
    if runner is None:
        return "running with no runner recorded"
    if runner.last_heartbeat is None or runner.last_heartbeat < timezone.now() - stale_after():
        return f"runner {runner.name} stopped sending heartbeats"
    return f"runner {runner.name} is no longer running this job"


def sweep_interval() -> float:
    return float(settings.SOLBOARD_SWEEP_SECONDS)


def maybe_sweep() -> SweepReport | None:
    """Sweep if this process has not swept for ``SOLBOARD_SWEEP_SECONDS`` (cheap to call often)."""
    global _last_sweep
    now = time.monotonic()
    if now - _last_sweep < sweep_interval():
        return None
    _last_sweep = now
    return sweep()
