"""What runners send to the site, validated against the evaluation it claims to be about.

Every handler is idempotent: a message delivered twice changes nothing the second time, and a
terminal status never changes. Messages about a delivery the site no longer expects (an older
job id, a cancelled evaluation) are answered with a cancel to the runner, never stored.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluator.report import Status
from leaderboard import gpu_time
from leaderboard.dispatch import store
from leaderboard.dispatch.enqueue import INFLIGHT, release_pending, send_control
from leaderboard.models import Evaluation, EvaluationStatus, GpuType, RunnerNode
from solboard_common.protocol import Heartbeat, JobProvisional, JobResult, JobStarted, parse_gpu_queue

log = logging.getLogger(__name__)
S = EvaluationStatus
RETRYABLE_OUTCOMES = ("runner_error", "sandbox_error", "refused")


def _evaluation(evaluation_id: int) -> Evaluation | None:
    return (Evaluation.objects.select_related("submission__problem", "gpu_type", "runner")
            .filter(pk=evaluation_id).first())


def runner_node(name: str) -> RunnerNode:
    node, _ = RunnerNode.objects.get_or_create(name=name)
    return node


def record_started(message: JobStarted) -> str:
    """A delivery started: count the attempt, mark running, or tell the runner to stop."""
    evaluation = _evaluation(message.evaluation_id)
    if evaluation is None:
        return "unknown evaluation"
    if str(evaluation.job_id) != message.job_id or evaluation.is_terminal or evaluation.cancel_requested:
        reason = (
            "stale delivery"
            if str(evaluation.job_id) != message.job_id
            else f"evaluation is {evaluation.status}"
        )
        send_control(message.runner, message.evaluation_id, message.job_id, reason)
        return reason
    node = runner_node(message.runner)
    Evaluation.objects.filter(pk=evaluation.pk, job_id=evaluation.job_id).update(attempts=F("attempts") + 1)
    evaluation.refresh_from_db()
    if evaluation.attempts > evaluation.max_attempts:
        _fail_too_many_attempts(evaluation, message.runner)
        return "too many attempts"
    if evaluation.status == S.QUEUED:
        evaluation.transition(S.RUNNING, expected=(S.QUEUED,), runner=node)
    elif evaluation.runner_id != node.pk:  # redelivered to another runner: the latest one owns it
        Evaluation.objects.filter(pk=evaluation.pk, status=S.RUNNING).update(runner=node)
    return "running"


def _fail_too_many_attempts(evaluation: Evaluation, runner: str) -> None:
    message = (f"the job was started {evaluation.attempts} times without finishing "
               f"(limit {evaluation.max_attempts}): it may be crashing its runner")
    if evaluation.transition(S.ERROR, expected=INFLIGHT, message=message):
        send_control(runner, evaluation.pk, str(evaluation.job_id), "too many attempts")
        transaction.on_commit(lambda: release_pending(user_id=evaluation.submission.user_id), robust=True)


def store_result(result: JobResult) -> str:
    """Store a runner's result once. Returns what happened (for logs and tests)."""
    evaluation = _evaluation(result.evaluation_id)
    if evaluation is None:
        return "unknown evaluation"
    if evaluation.is_terminal:
        return f"ignored: already {evaluation.status}{gpu_time.record_after_cancel(evaluation, result)}"
    if str(evaluation.job_id) != result.job_id:
        return "ignored: stale job id"
    claimed_by = _claimant(evaluation)
    if claimed_by is not None and claimed_by != result.runner:
        return f"ignored: claimed by {claimed_by}, not {result.runner}"
    if evaluation.status == S.QUEUED and evaluation.enqueued_at is None:
        return "ignored: not handed to any runner"
    began = gpu_time.job_began(evaluation)
    with transaction.atomic():
        outcome = _apply(evaluation, result)
        if outcome.startswith("stored"):  # the job ended: the GPU time it used (a requeue records none)
            gpu_time.record(evaluation, result, began)
    if outcome.startswith("stored"):
        transaction.on_commit(lambda: _after_terminal(evaluation.pk), robust=True)
    return outcome


def store_provisional(message: JobProvisional) -> str:
    """A ranked job's report before its witness: kept beside the running evaluation, shown, never
    ranked; the job's result replaces it. Only the runner that claimed the job may send it."""
    evaluation = _evaluation(message.evaluation_id)
    if evaluation is None:
        return "unknown evaluation"
    if evaluation.status != S.RUNNING:  # ended already, or its job_started was lost: nothing to show early
        return f"ignored: {evaluation.status}"
    if str(evaluation.job_id) != message.job_id:
        return "ignored: stale job id"
    claimed_by = _claimant(evaluation)
    if claimed_by != message.runner:
        return f"ignored: claimed by {claimed_by}, not {message.runner}"
    if evaluation.mode != "ranked":
        return "ignored: a provisional report is a ranked job's"
    return store.store_provisional_report(evaluation, message)


def _claimant(evaluation: Evaluation) -> str | None:
    """The runner whose job_started (or heartbeat) claimed this delivery: only it may answer."""
    if evaluation.status == S.RUNNING and evaluation.runner is not None:
        return evaluation.runner.name
    return None


def _apply(evaluation: Evaluation, result: JobResult) -> str:
    if result.outcome == "refused":
        # Nothing started, so no job_started counted an attempt; but the runner would refuse the job
        # again on every hand-over (an imported problem its host lacks), and an uncounted requeue
        # looped once a second for as long as it stayed online.
        same_job = Evaluation.objects.filter(pk=evaluation.pk, job_id=evaluation.job_id)
        same_job.update(attempts=F("attempts") + 1)
        evaluation.refresh_from_db(fields=["attempts"])
        why = f"refused by {result.runner}: {result.message}"
        return requeue_or_fail(evaluation, why, log_text=result.log)
    if result.outcome in RETRYABLE_OUTCOMES:
        return requeue_or_fail(evaluation, f"{result.outcome}: {result.message}", log_text=result.log)
    if evaluation.status == S.QUEUED:  # its job_started was lost: the result proves it ran
        evaluation.transition(S.RUNNING, expected=(S.QUEUED,), runner=runner_node(result.runner))
    if result.outcome == "completed" and result.report is not None:
        return store.store_report(evaluation, result)
    status = {"cancelled": S.CANCELLED, "timeout": S.TIMEOUT}.get(result.outcome, S.ERROR)
    message = result.message or result.outcome
    # A job its own processes ended (its judge killed or stopped from inside, a memory cap) failed
    # at run time on its own account: the verdict makes it charged (api/quotas.py refunds only
    # errors without one).
    verdict = Status.RUNTIME_ERROR.value if result.outcome == "job_failed" else None
    done = evaluation.transition(status, expected=(S.RUNNING,), message=message, log=result.log,
                                 provisional_report=None, evaluator_status=verdict)
    return f"stored {status}" if done else "ignored: status changed meanwhile"


def requeue_or_fail(evaluation: Evaluation, why: str, log_text: str = "") -> str:
    """The runner could not finish (lost, crashed, GPU busy): try again on a fresh job id, or
    give up as ERROR once the attempts are spent."""
    if evaluation.attempts >= evaluation.max_attempts:
        message = f"gave up after {evaluation.attempts} attempts; last: {why}"
        done = evaluation.transition(S.ERROR, expected=INFLIGHT, message=message, log=log_text)
        return "stored error" if done else "ignored: status changed meanwhile"
    new_job = uuid.uuid4()
    if evaluation.status == S.RUNNING:
        done = evaluation.transition(
            S.QUEUED, expected=(S.RUNNING,), job_id=new_job, message=f"requeued: {why}"
        )
    else:  # released before it started: a new job id and back to the site's waiting list
        done = bool(
            Evaluation.objects.filter(pk=evaluation.pk, status=S.QUEUED, job_id=evaluation.job_id).update(
                job_id=new_job, enqueued_at=None, runner=None, message=f"requeued: {why}"
            )
        )
    if done:
        user_id, gpu_type_id = evaluation.submission.user_id, evaluation.gpu_type_id
        transaction.on_commit(
            lambda: release_pending(user_id=user_id, gpu_type_ids=[gpu_type_id]), robust=True
        )
    return "requeued" if done else "ignored: status changed meanwhile"


def _after_terminal(evaluation_id: int) -> None:
    from leaderboard.ranking_maintenance import refresh_rankings_for

    evaluation = Evaluation.objects.select_related("submission").get(pk=evaluation_id)
    refresh_rankings_for(evaluation)
    release_pending(user_id=evaluation.submission.user_id, gpu_type_ids=[evaluation.gpu_type_id])


def record_heartbeat(beat: Heartbeat) -> RunnerNode:
    """Upsert the runner's row; the time of contact is when the site received it (no clock skew)."""
    gpu_type, count = _gpu_type_of(beat)
    current = (
        Evaluation.objects.filter(pk=beat.current_evaluation_id).first()
        if beat.current_evaluation_id
        else None
    )
    node, _ = RunnerNode.objects.update_or_create(name=beat.runner, defaults={
        "hostname": beat.hostname, "gpu_type": gpu_type, "gpu_count": count,
        "gpus": [gpu.model_dump(mode="json") for gpu in beat.gpus], "queues": beat.queues,
        "driver": beat.gpus[0].driver if beat.gpus else "", "calibration": beat.calibration,
        "version": beat.version[:64], "last_heartbeat": timezone.now(),
        "current_job_id": beat.current_job, "current_evaluation": current,
    })
    if current is not None and current.status == S.QUEUED and str(current.job_id) == beat.current_job:
        current.transition(S.RUNNING, expected=(S.QUEUED,), runner=node)  # its job_started was lost
    return node


def _gpu_type_of(beat: Heartbeat) -> tuple[GpuType | None, int]:
    if not beat.queues:
        return None, len(beat.gpus) or 1
    try:
        key, count = parse_gpu_queue(beat.queues[0])
    except ValueError:
        return None, len(beat.gpus) or 1
    return GpuType.objects.filter(key=key).first(), count
