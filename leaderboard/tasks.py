"""Site tasks (queue ``site``): thin wrappers that take ids or plain JSON and call plain functions.

Every task names its queue and its time limits: declare tasks with ``@site_task(name=...,
queue=SITE_QUEUE, time_limit=..., soft_time_limit=...)`` (not ``@app.task(queue=...)``: Celery 5.7
deprecates the queue attribute; ``site_task`` puts it in the routes table). Runner-facing tasks
(storing results, heartbeats) are added next to these by the runner side of the site.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from django.db import OperationalError

# The webhook and page-rebuild tasks live beside their code; importing them registers them here.
from leaderboard.api.tasks import deliver_webhook  # noqa: F401
from leaderboard.celery import site_task
from leaderboard.web.tasks import rebuild_page  # noqa: F401
from solboard_common.protocol import (
    SITE_HEARTBEAT_TASK,
    SITE_PROVISIONAL_TASK,
    SITE_QUEUE,
    SITE_RESULT_TASK,
    SITE_STARTED_TASK,
    Heartbeat,
    JobProvisional,
    JobResult,
    JobStarted,
)


@site_task(name="leaderboard.ping", bind=True, queue=SITE_QUEUE, time_limit=30, soft_time_limit=20)
def ping(self: Any) -> dict[str, Any]:
    """Diagnostic: which worker took the task, and from which queue it was delivered."""
    delivery = self.request.delivery_info or {}
    return {
        "hostname": self.request.hostname or socket.gethostname(),
        "queue": delivery.get("routing_key"),
        "exchange": delivery.get("exchange"),
        "task_id": self.request.id,
    }


# ---------------------------------------------------------------- runner-facing tasks
# Thin: leaderboard.dispatch.inbox authenticates the message (runner credential, HMAC, time window,
# nonce, node name), validates it with its protocol model, then calls leaderboard.dispatch. A
# message that fails either is logged and dropped (acked): redelivering it would fail the same way.

_runner_log = logging.getLogger("leaderboard.dispatch")
#: A locked or briefly unreachable database is retried, not dropped: acks_late acks a task that
#: raised, so without a retry the runner's message would be gone.
_DB_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": True, "retry_backoff_max": 60,
             "max_retries": 8}


@site_task(name=SITE_RESULT_TASK, queue=SITE_QUEUE, time_limit=120, soft_time_limit=100, acks_late=True,
           **_DB_RETRY)
def store_result(payload: dict[str, Any]) -> str:
    from leaderboard import dispatch
    from leaderboard.dispatch.inbox import receive

    def store(result: JobResult) -> str:
        outcome = dispatch.store_result(result)
        _runner_log.info("result %s of evaluation %s from %s: %s", result.job_id, result.evaluation_id,
                         result.runner, outcome)
        return outcome

    return receive(SITE_RESULT_TASK, payload, JobResult, store)


@site_task(name=SITE_PROVISIONAL_TASK, queue=SITE_QUEUE, time_limit=120, soft_time_limit=100, acks_late=True,
           **_DB_RETRY)
def store_provisional(payload: dict[str, Any]) -> str:
    """A ranked job's report before its witness (protocol 2): authenticated as every runner message."""
    from leaderboard import dispatch
    from leaderboard.dispatch.inbox import receive

    def store(message: JobProvisional) -> str:
        outcome = dispatch.store_provisional(message)
        _runner_log.info("provisional %s of evaluation %s from %s: %s", message.job_id, message.evaluation_id,
                         message.runner, outcome)
        return outcome

    return receive(SITE_PROVISIONAL_TASK, payload, JobProvisional, store)


@site_task(name=SITE_STARTED_TASK, queue=SITE_QUEUE, time_limit=60, soft_time_limit=50, acks_late=True,
           **_DB_RETRY)
def job_started(payload: dict[str, Any]) -> str:
    from leaderboard import dispatch
    from leaderboard.dispatch.inbox import receive

    return receive(SITE_STARTED_TASK, payload, JobStarted, dispatch.record_started)


@site_task(name=SITE_HEARTBEAT_TASK, queue=SITE_QUEUE, time_limit=120, soft_time_limit=100)
def runner_heartbeat(payload: dict[str, Any]) -> str:
    """Record the heartbeat, then sweep if this worker has not swept for a while (so the sweeper
    runs wherever runners are alive, without a beat process)."""
    from leaderboard import dispatch
    from leaderboard.dispatch.inbox import receive

    def record(beat: Heartbeat) -> str:
        dispatch.record_heartbeat(beat)
        return "recorded"

    outcome = receive(SITE_HEARTBEAT_TASK, payload, Heartbeat, record)
    if outcome != "recorded":
        return outcome
    swept = dispatch.maybe_sweep()
    return "recorded" if swept is None else f"recorded; swept {swept}"


@site_task(name="leaderboard.sweep", queue=SITE_QUEUE, time_limit=300, soft_time_limit=240)
def sweep() -> dict[str, int]:
    """For celery beat (e.g. every 30 s) where heartbeats alone are not enough."""
    from leaderboard import dispatch

    report = dispatch.sweep()
    return {"released": report.released, "requeued": report.requeued, "failed": report.failed}
