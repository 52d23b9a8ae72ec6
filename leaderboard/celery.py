"""The site's Celery app (Django-aware). Workers: ``celery -A leaderboard.celery worker -Q site``.

Runner nodes have their own app (runners/, no Django) built from the same
``solboard_common.config.celery_common_settings``; the two sides meet only through task names and queues
(solboard_common/protocol.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from celery import Celery

from solboard_common.config import celery_common_settings
from solboard_common.protocol import RUNNER_TASK, SITE_QUEUE, parse_gpu_queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")


class RoutingError(ValueError):
    """A task was sent somewhere it must never go."""


#: Queue of every task declared with ``site_task``: the routes table the router reads.
TASK_QUEUES: dict[str, str] = {}


def route_task(
    name: str, args: Any, kwargs: Any, options: dict[str, Any], task: Any = None, **extra: Any
) -> dict[str, str] | None:
    """Every ``leaderboard.*`` task runs on ``site``; a runner job must name its GPU queue.

    A runner job without an explicit ``gpu.<type>.x<n>`` queue would otherwise land on the default
    queue, where no runner listens: refuse it at send time instead of losing it silently.
    """
    if name in TASK_QUEUES:
        return {"queue": TASK_QUEUES[name]}
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


def site_task(
    *, name: str, queue: str, time_limit: float, soft_time_limit: float, **options: Any
) -> Callable[[Callable[..., Any]], Any]:
    """``@app.task`` for site tasks: each names its queue and its time limits.

    The queue goes into the routes table rather than the task's ``queue`` attribute, which Celery
    5.7 deprecates (it warns on every worker start and goes away in 6.0).
    """
    if not name.startswith("leaderboard."):
        raise ValueError(f"site task {name!r} must be named leaderboard.*")
    if queue != SITE_QUEUE:
        raise ValueError(f"site task {name!r} must run on {SITE_QUEUE!r}, not {queue!r}: it uses Django")
    if not 0 < soft_time_limit < time_limit:
        raise ValueError(f"site task {name!r}: need 0 < soft_time_limit < time_limit")

    def register(function: Callable[..., Any]) -> Any:
        TASK_QUEUES[name] = queue
        return app.task(name=name, time_limit=time_limit, soft_time_limit=soft_time_limit, **options)(
            function
        )

    return register
