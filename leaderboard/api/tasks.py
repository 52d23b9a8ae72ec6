"""The webhook task of the site worker (registered through ``leaderboard.tasks``)."""

from __future__ import annotations

from leaderboard.api.webhooks import TASK_NAME, attempt, queue_delivery
from leaderboard.celery import site_task
from solboard_common.protocol import SITE_QUEUE


@site_task(name=TASK_NAME, queue=SITE_QUEUE, time_limit=60, soft_time_limit=45)
def deliver_webhook(delivery_id: int) -> str:
    """One try of one delivery; a failure queues the next try with its backoff as countdown."""
    retry_in = attempt(delivery_id)
    if retry_in is not None:
        queue_delivery(delivery_id, countdown=retry_in)
        return f"retry in {retry_in}s"
    return "done"
