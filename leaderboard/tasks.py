"""Site tasks (queue ``site``): thin wrappers that take ids or plain JSON and call plain functions.

Every task names its queue and its time limits. Runner-facing tasks (storing results, heartbeats)
are added next to these by the runner side of the site.
"""

from __future__ import annotations

import socket
from typing import Any

from leaderboard.celery import app
from runners.protocol import SITE_QUEUE


@app.task(name="leaderboard.ping", bind=True, queue=SITE_QUEUE, time_limit=30, soft_time_limit=20)
def ping(self: Any) -> dict[str, Any]:
    """Diagnostic: which worker took the task, and from which queue it was delivered."""
    delivery = self.request.delivery_info or {}
    return {
        "hostname": self.request.hostname or socket.gethostname(),
        "queue": delivery.get("routing_key"),
        "exchange": delivery.get("exchange"),
        "task_id": self.request.id,
    }
