"""The runner's Celery app: no Django, no database, no result backend.

Workers: ``celery -A runners.celery_app worker -Q gpu.<type>.x<n> --pool solo`` (the node
supervisor starts them; see node.py). Settings come from ``solboard_common.config.celery_common_settings``,
shared with the site's app: JSON only, acks_late, reject_on_worker_lost, prefetch 1, visibility
timeout longer than the longest job.
"""

from __future__ import annotations

import ctypes
import os
import signal

from celery import Celery
from celery.signals import task_postrun, worker_process_init, worker_ready, worker_shutdown

from solboard_common.config import broker_url

PR_SET_PDEATHSIG = 1
SUPERVISOR_PID_VARIABLE = "SOLBOARD_RUNNER_SUPERVISOR_PID"


def build_app(url: str | None = None) -> Celery:
    from solboard_common.config import celery_common_settings

    app = Celery("runners")
    app.conf.update(celery_common_settings(url or broker_url()))
    app.conf.update(
        task_ignore_result=True,
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        imports=["runners.tasks"],
    )
    return app


app = build_app()


def die_with_supervisor() -> None:
    """A worker must not outlive its node: heartbeats stop with the supervisor, so the site
    requeues its jobs, and a worker still running one would only duplicate work."""
    supervisor = os.environ.get(SUPERVISOR_PID_VARIABLE)
    if not supervisor:
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(supervisor):
        os._exit(1)


@worker_process_init.connect
def _on_process_init(**_: object) -> None:
    die_with_supervisor()


@worker_ready.connect
def _on_ready(**_: object) -> None:
    die_with_supervisor()
    if os.environ.get("SOLBOARD_RUNNER_SLOT"):  # a slot's worker (not the control worker)
        from runners import jobflow

        jobflow.start_spares()


@worker_shutdown.connect
def _on_shutdown(**_: object) -> None:
    """A warm spare dies with its worker anyway (its jail has a parent-death signal); stopping it
    here also removes its scratch folder."""
    from runners import jobflow

    jobflow.stop_spares()


@task_postrun.connect
def _maybe_stop(**_: object) -> None:
    """After a job that left the slot unusable (GPU still held), stop taking jobs: the worker
    exits (warm shutdown) and the supervisor restarts it once the GPU is free."""
    from runners import jobflow

    if jobflow.STOP_AFTER_TASK:
        os.kill(os.getpid(), signal.SIGTERM)
