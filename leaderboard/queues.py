"""Where a queued evaluation stands, and whether any runner serves its queue: one answer for the
API (and so the CLI) and the website.

A queue position counts from 1: position 1 is the next evaluation of its GPU type to start. A
runner *serves* a queue when it is alive (a heartbeat within ``SOLBOARD_RUNNER_STALE_SECONDS``)
and consumes that queue (``gpu.<type>.x<n>``: a multi-GPU problem needs a runner with that many
GPUs of the type). An evaluation whose queue no runner serves waits until one connects; the site
says so instead of showing a position that never moves.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from leaderboard.models import Evaluation, EvaluationStatus, RunnerNode
from solboard_common.protocol import gpu_queue


def queue_position(evaluation: Evaluation) -> int | None:
    """1 for the next to start on its GPU type; None once it is no longer queued."""
    if evaluation.status != EvaluationStatus.QUEUED:
        return None
    earlier = Q(queued_at__lt=evaluation.queued_at) | Q(queued_at=evaluation.queued_at, pk__lt=evaluation.pk)
    ahead = Evaluation.objects.filter(
        earlier, gpu_type_id=evaluation.gpu_type_id, status=EvaluationStatus.QUEUED, cancel_requested=False
    ).count()
    return ahead + 1


def live_runners_by_queue() -> Counter[str]:
    """Queue name -> how many live runners consume it (one small query: runner rows are few)."""
    cutoff = timezone.now() - RunnerNode.stale_after()
    served: Counter[str] = Counter()
    for queues in RunnerNode.objects.filter(last_heartbeat__gte=cutoff).values_list("queues", flat=True):
        served.update(name for name in set(queues or []) if isinstance(name, str))
    return served


@dataclass(frozen=True)
class Availability:
    """How many live runners serve the queue a job for this GPU type and world size goes to."""

    gpu_type: str
    queue: str
    runners: int

    @property
    def served(self) -> bool:
        return self.runners > 0

    def warning(self) -> str:
        """'' when served; else the sentence every surface shows."""
        if self.served:
            return ""
        return (f"no runner for {self.gpu_type} is online (queue {self.queue}): the evaluation stays queued "
                f"until one connects")


def availability(gpu_key: str, world_size: int, served: Counter[str] | None = None) -> Availability:
    queue = gpu_queue(gpu_key, world_size)
    counts = live_runners_by_queue() if served is None else served
    return Availability(gpu_key, queue, counts.get(queue, 0))


def unserved(gpu_keys: list[str], world_size: int) -> list[Availability]:
    """The GPU types among ``gpu_keys`` whose queue no live runner serves now."""
    counts = live_runners_by_queue()
    return [
        found
        for key in dict.fromkeys(gpu_keys)
        if not (found := availability(key, world_size, counts)).served
    ]
