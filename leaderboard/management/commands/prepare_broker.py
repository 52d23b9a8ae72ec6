"""``manage.py prepare_broker``: create the embedded broker's tables and queues, and the result
backend's tables, once, before the processes that use them start.

kombu's SQLAlchemy transport creates its tables and each queue's row the first time a process
touches them, with a check-then-insert that is not atomic across processes: when the site worker
(consuming ``site``) and the runner (sending its first heartbeat to ``site``) start together on an
empty ``var/``, both insert the row and one dies with ``UNIQUE constraint failed: kombu_queue.name``.
``make run`` runs this step first, so every row a child looks for already exists. On Redis or
RabbitMQ a queue declaration is atomic and there is nothing to do.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from leaderboard.models import GpuType, RunnerCredential
from solboard_common.protocol import SITE_QUEUE, control_queue, gpu_queue

#: GPU counts a runner node may serve per GPU type (``gpu.<type>.x<n>``); an unused queue is one row.
GPU_COUNTS = (1, 2, 4, 8)


def queue_names() -> list[str]:
    """Every queue a web process, site worker or runner node of this site may declare."""
    names = [SITE_QUEUE]
    for key in GpuType.objects.values_list("key", flat=True):
        names += [gpu_queue(key, count) for count in GPU_COUNTS]
    nodes = RunnerCredential.objects.filter(revoked_at__isnull=True).values_list("node_name", flat=True)
    names += [control_queue(node) for node in sorted(set(nodes))]
    return names


def embedded(url: str) -> bool:
    return url.startswith(("sqla+", "sqlalchemy+", "db+"))


def prepare_results(app: Any) -> bool:
    """The database result backend's tables (Celery creates them lazily too)."""
    if not embedded(str(app.conf.result_backend or "")):
        return False
    app.backend.ResultSession().close()
    return True


def prepare_queues(app: Any) -> int:
    if not embedded(str(app.conf.broker_url)):
        return 0
    names = queue_names()
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for name in names:
            channel.queue_declare(queue=name)
    return len(names)


class Command(BaseCommand):
    help = "Create the embedded broker's tables and queues once, before its processes start."

    def handle(self, *args: Any, **options: Any) -> None:
        from leaderboard.celery import app

        declared = prepare_queues(app)
        results = prepare_results(app)
        if declared or results:
            self.stdout.write(f"embedded broker: {declared} queue(s) ready; result tables "
                              f"{'ready' if results else 'not used'}")
        else:
            self.stdout.write("the broker is a server (Redis, RabbitMQ): nothing to prepare")
