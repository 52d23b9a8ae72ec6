"""Runner tasks (thin): a job from a ``gpu.<type>.x<n>`` queue, a control message from the node's
control queue. The work is in jobflow.py."""

from __future__ import annotations

from typing import Any

from runners import jobflow
from runners.celery_app import app
from solboard_common.config import BROKER_VISIBILITY_TIMEOUT_S
from solboard_common.protocol import CONTROL_TASK, RUNNER_TASK


@app.task(
    name=RUNNER_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
    # A backstop only: jobflow enforces each job's wall limit itself and never raises.
    time_limit=BROKER_VISIBILITY_TIMEOUT_S, soft_time_limit=BROKER_VISIBILITY_TIMEOUT_S - 60,
)
def run_job(self: Any, payload: dict[str, Any]) -> None:
    messenger = jobflow.Messenger(app)
    try:
        jobflow.handle_job(payload, messenger)
    except Exception as error:  # a bug here must not swallow the job (acks_late acks it)
        jobflow.report_crash(payload, messenger, error)


@app.task(name=CONTROL_TASK, ignore_result=True, acks_late=False, time_limit=60, soft_time_limit=50)
def control(payload: dict[str, Any]) -> None:
    jobflow.handle_control(payload)
