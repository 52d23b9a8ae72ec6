"""Handing evaluations to the broker, fairly, and taking them back (cancel).

An evaluation is saved with ``enqueued_at`` null. ``release_pending`` hands waiting evaluations to
the broker, oldest first within each user, never more than K (``SOLBOARD_MAX_INFLIGHT_PER_USER``)
of one user's evaluations per GPU type at once: one user's 500 submissions wait on the site, not
in the broker's FIFO in front of everybody else. Each hand-over is claimed with a conditional
UPDATE and sent inside the same transaction: if the send fails, the claim rolls back and the
sweeper retries; two site processes never send the same evaluation twice. A new job id is drawn
for each hand-over after a requeue, so a late result of an earlier delivery is recognised as stale.
"""

from __future__ import annotations

import logging
import math
from functools import cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from evaluator.vocabulary import stage_limits
from leaderboard.models import Evaluation, EvaluationStatus
from solboard_common.protocol import (
    CONTROL_TASK,
    RUNNER_TASK,
    ControlMessage,
    Job,
    JobLimits,
    control_queue,
    gpu_queue,
    node_of_runner,
)

log = logging.getLogger(__name__)
S = EvaluationStatus
INFLIGHT = (S.QUEUED, S.RUNNING)
CONTROL_EXPIRES_S = 3600


class CancelNotAllowed(PermissionError):
    """Only the owner of a submission (or staff) may cancel its evaluations."""


def max_inflight_per_user() -> int:
    return int(settings.SOLBOARD_MAX_INFLIGHT_PER_USER)


def celery_app() -> Any:
    """The site's app, or one like it for the broker the settings name now (tests, tools).

    Compares configured URLs (``conf.get``): Celery's ``conf.broker_url`` property prefers the
    CELERY_BROKER_URL environment variable, which must therefore agree with the settings."""
    from leaderboard.celery import app

    url = settings.CELERY_BROKER_URL
    return app if app.conf.get("broker_url") == url else _app_for(url)


@cache
def _app_for(url: str) -> Any:
    from leaderboard.celery import build_app

    return build_app(url, None, main="leaderboard-dispatch")


def job_limits(mode: str = "ranked") -> JobLimits:
    """Stage limits sent with every job (settings SOLBOARD_JOB_*_SECONDS; defaults: the protocol's).
    A test-mode job gets no more than the evaluator's test-mode limits (``vocabulary.stage_limits``):
    the runner's wall limit is their sum, so a test job that hangs frees its slot sooner."""
    compile_s, test_s, ranked_s = stage_limits("test") if mode == "test" else (math.inf,) * 3
    return JobLimits(compile_seconds=min(settings.SOLBOARD_JOB_COMPILE_SECONDS, compile_s),
                     test_seconds=min(settings.SOLBOARD_JOB_TEST_SECONDS, test_s),
                     ranked_seconds=min(settings.SOLBOARD_JOB_RANKED_SECONDS, ranked_s))


def queue_for(evaluation: Evaluation) -> str:
    return gpu_queue(evaluation.gpu_type.key, evaluation.submission.problem.world_size)


def build_job(evaluation: Evaluation) -> Job:
    submission = evaluation.submission
    problem = submission.problem
    return Job(
        job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, attempt=evaluation.attempts + 1,
        problem=problem.name, problem_version=submission.problem_version, language=submission.language,  # type: ignore[arg-type]
        source=submission.source, source_sha256=submission.source_sha256, launch_spec=submission.launch_spec,
        mode=evaluation.mode, seed=evaluation.secret_seed, shapes=evaluation.shape_selection,  # type: ignore[arg-type]
        gpu_type=evaluation.gpu_type.key, gpu_count=problem.world_size, limits=job_limits(evaluation.mode),
    )


def enqueue_on_commit(user_id: int, gpu_type_ids: list[int]) -> None:
    """After the current transaction commits, hand what this user may run to the broker.

    Robust: a broker that is down must not fail the (already committed) submission; the
    evaluations stay with enqueued_at null and the sweeper hands them over later."""
    transaction.on_commit(lambda: release_pending(user_id=user_id, gpu_type_ids=gpu_type_ids), robust=True)


def release_pending(user_id: int | None = None, gpu_type_ids: list[int] | None = None) -> int:
    """Hand waiting evaluations to the broker within each user's per-GPU-type limit."""
    waiting = Evaluation.objects.filter(status=S.QUEUED, enqueued_at__isnull=True, cancel_requested=False)
    if user_id is not None:
        waiting = waiting.filter(submission__user_id=user_id)
    if gpu_type_ids is not None:
        waiting = waiting.filter(gpu_type_id__in=gpu_type_ids)
    pairs = set(waiting.values_list("submission__user_id", "gpu_type_id").distinct())
    sent = 0
    for user, gpu_type in sorted(pairs):
        sent += _release_for(user, gpu_type)
    return sent


def _inflight(user_id: int, gpu_type_id: int) -> int:
    return Evaluation.objects.filter(
        submission__user_id=user_id, gpu_type_id=gpu_type_id, status__in=INFLIGHT, enqueued_at__isnull=False
    ).count()


def _release_for(user_id: int, gpu_type_id: int) -> int:
    room = max_inflight_per_user() - _inflight(user_id, gpu_type_id)
    if room <= 0:
        return 0
    candidates = list(
        Evaluation.objects.filter(
            submission__user_id=user_id, gpu_type_id=gpu_type_id, status=S.QUEUED,
            enqueued_at__isnull=True, cancel_requested=False,
        ).order_by("-priority", "queued_at", "id").values_list("id", flat=True)[:room]
    )
    return sum(hand_to_broker(evaluation_id) for evaluation_id in candidates)


def retired_version(evaluation: Evaluation) -> str:
    """Why this evaluation cannot run, or "": its submission was made against an older catalogue
    version of the problem than the site's (a new baseline or tolerance makes a new version, and
    runners only carry the current one). Its results under that version stay readable."""
    submission = evaluation.submission
    current = submission.problem.version
    if submission.problem_version == current:
        return ""
    return (f"this submission was made against {submission.problem.name} v{submission.problem_version}; the "
            f"catalogue has moved to v{current} (docs/problems.md, Versions), which runners now carry, so it "
            f"cannot be evaluated as v{submission.problem_version} any more: submit the source again to "
            f"evaluate it against v{current}")


def hand_to_broker(evaluation_id: int) -> bool:
    """Claim (enqueued_at null -> now) and send in one transaction; False if someone else did."""
    with transaction.atomic():
        claimed = Evaluation.objects.filter(
            pk=evaluation_id, status=S.QUEUED, enqueued_at__isnull=True, cancel_requested=False
        ).update(enqueued_at=timezone.now())
        if not claimed:
            return False
        evaluation = Evaluation.objects.select_related("submission__problem", "gpu_type").get(
            pk=evaluation_id
        )
        retired = retired_version(evaluation)
        if retired:  # no runner has that version's problem any more: say so now, not after a job
            evaluation.transition(S.ERROR, expected=(S.QUEUED,), message=retired)
            return False
        queue = queue_for(evaluation)
        Evaluation.objects.filter(pk=evaluation_id).update(queue=queue)
        job = build_job(evaluation)
        # Priority is honoured here, in the order evaluations are released, not by the broker
        # (the embedded transport has no priorities).
        celery_app().send_task(RUNNER_TASK, args=[job.model_dump(mode="json")], queue=queue)
    return True


def send_control(runner_name: str, evaluation_id: int, job_id: str, reason: str) -> None:
    """Tell the node running ``job_id`` to stop it (its control queue works on every transport)."""
    message = ControlMessage(job_id=job_id, evaluation_id=evaluation_id, reason=reason)
    try:
        celery_app().send_task(CONTROL_TASK, args=[message.model_dump(mode="json")],
                               queue=control_queue(node_of_runner(runner_name)), expires=CONTROL_EXPIRES_S)
    except ValueError:
        log.warning("runner %r has no valid node name; cancel of %s not sent", runner_name, job_id)


def cancel_evaluation(evaluation: Evaluation, user: Any) -> bool:
    """Cancel a queued or running evaluation (owner or staff). False when it had already ended.

    Queued: cancelled at once (if a runner still picks it up, its job_started is answered with a
    cancel). Running: cancelled at once, and the runner is told to kill the job and free the GPU.
    """
    if not (user.is_staff or evaluation.submission.user_id == user.pk):
        raise CancelNotAllowed(f"{user} may not cancel evaluation {evaluation.pk}")
    Evaluation.objects.filter(pk=evaluation.pk, status__in=INFLIGHT).update(cancel_requested=True)
    evaluation.refresh_from_db()
    runner = evaluation.runner.name if evaluation.runner else None
    if not evaluation.transition(S.CANCELLED, expected=INFLIGHT, message=f"cancelled by {user}"):
        return False
    if runner:
        send_control(runner, evaluation.pk, str(evaluation.job_id), f"cancelled by {user}")
    transaction.on_commit(lambda: release_pending(user_id=evaluation.submission.user_id,
                                                  gpu_type_ids=[evaluation.gpu_type_id]), robust=True)
    return True


def pending_counts() -> dict[str, dict[str, int]]:
    """Per GPU type: evaluations waiting on the site, handed to the broker, running."""
    queued = Q(status=S.QUEUED)
    rows = (Evaluation.objects.filter(status__in=INFLIGHT).values("gpu_type__key").annotate(
        waiting=Count("id", filter=queued & Q(enqueued_at__isnull=True)),
        in_broker=Count("id", filter=queued & Q(enqueued_at__isnull=False)),
        running=Count("id", filter=Q(status=S.RUNNING)),
    ))
    return {row["gpu_type__key"]: {"waiting": row["waiting"], "in_broker": row["in_broker"],
                                   "running": row["running"]} for row in rows}
