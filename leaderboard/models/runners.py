"""Runner nodes as the site sees them: what they reported in their last heartbeat."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class RunnerNode(models.Model):
    name = models.CharField(max_length=200, unique=True, help_text="hostname:gpu-index or configured.")
    hostname = models.CharField(max_length=255, blank=True)
    gpu_type = models.ForeignKey(
        "leaderboard.GpuType", on_delete=models.PROTECT, null=True, blank=True, related_name="runners"
    )
    gpu_count = models.PositiveSmallIntegerField(default=1)
    gpus = models.JSONField(default=list, blank=True, help_text="index, uuid, name, memory, driver.")
    queues = models.JSONField(default=list, blank=True)
    driver = models.CharField(max_length=64, blank=True)
    calibration = models.JSONField(default=dict, blank=True, help_text="Attainable ceilings.")
    version = models.CharField(max_length=64, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    current_job_id = models.CharField(max_length=100, null=True, blank=True)
    current_evaluation = models.ForeignKey(
        "leaderboard.Evaluation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    registered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["last_heartbeat"], name="runner_heartbeat_idx")]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def stale_after() -> timedelta:
        return timedelta(seconds=settings.SOLBOARD_RUNNER_STALE_SECONDS)

    @property
    def is_alive(self) -> bool:
        if self.last_heartbeat is None:
            return False
        return timezone.now() - self.last_heartbeat <= self.stale_after()
