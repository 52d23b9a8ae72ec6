"""The site's Celery app (Django-aware). Workers: ``celery -A leaderboard.celery worker -Q site``.

Runner nodes have their own app (runners/, no Django) built from the same
``runners.config.celery_common_settings``; the two sides meet only through task names and queues
(runners/protocol.py).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from runners.config import celery_common_settings
from runners.protocol import RUNNER_TASK, SITE_QUEUE, parse_gpu_queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")


class RoutingError(ValueError):
    """A task was sent somewhere it must never go."""


def route_task(
    name: str, args: Any, kwargs: Any, options: dict[str, Any], task: Any = None, **extra: Any
) -> dict[str, str] | None:
    """Every ``leaderboard.*`` task runs on ``site``; a runner job must name its GPU queue.

    A runner job without an explicit ``gpu.<type>.x<n>`` queue would otherwise land on the default
    queue, where no runner listens: refuse it at send time instead of losing it silently.
    """
    if name.startswith("leaderboard."):
        return {"queue": SITE_QUEUE}
    if name == RUNNER_TASK:
        queue = options.get("queue")
        queue_name = getattr(queue, "name", queue)
        if not queue_name:
            raise RoutingError(f"{RUNNER_TASK} needs an explicit queue: gpu_queue(gpu_type, gpu_count)")
        parse_gpu_queue(str(queue_name))
        return {"queue": str(queue_name)}
    return None


def build_app(broker_url: str, result_backend: str | None, main: str = "leaderboard") -> Celery:
    """A configured site app; tests build one per temporary broker with the same routing."""
    app = Celery(main)
    app.conf.update(celery_common_settings(broker_url, result_backend))
    app.conf.update(
        task_routes=(route_task,),
        task_time_limit=300,
        task_soft_time_limit=240,
        worker_send_task_events=False,
    )
    return app


def _django_app() -> Celery:
    from django.conf import settings

    app = build_app(settings.CELERY_BROKER_URL, settings.CELERY_RESULT_BACKEND)
    app.autodiscover_tasks(["leaderboard"])
    return app


app = _django_app()
