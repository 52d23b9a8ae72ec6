"""Runner nodes as the site sees them: what they reported in their last heartbeat."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.validators import RegexValidator
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


class RunnerCredential(models.Model):
    """What lets a runner node speak to the site: issued by an operator, bound to one node name.

    The key itself is stored nowhere: it is derived from SECRET_KEY and ``public_id``
    (leaderboard/dispatch/credentials.py), so a copy of the database alone cannot sign a message,
    and the site can still check the runner's HMAC. ``key_fingerprint`` lets an operator match a
    runner's credential file to its row.
    """

    public_id = models.CharField(max_length=32, unique=True, editable=False)
    node_name = models.CharField(max_length=100, help_text="The runner node this credential speaks for.",
                                 validators=[RegexValidator(r"^[A-Za-z0-9_.-]{1,100}$",
                                                            "letters, digits, '-', '_' and '.' only")])
    key_fingerprint = models.CharField(max_length=12, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, help_text="Operator (or 'make run').")
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    messages_accepted = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["node_name", "-created_at"]
        indexes = [models.Index(fields=["node_name"], name="runner_credential_node_idx")]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "active"
        return f"{self.public_id} ({self.node_name}, {state})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class RunnerMessageNonce(models.Model):
    """Nonces of accepted runner messages, kept while their timestamp is inside the window, so
    the same signed message is never accepted twice (a unique row per credential and nonce)."""

    credential = models.ForeignKey(RunnerCredential, on_delete=models.CASCADE, related_name="+")
    nonce = models.CharField(max_length=64)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["credential", "nonce"], name="runner_nonce_unique")]
        indexes = [models.Index(fields=["received_at"], name="runner_nonce_received_idx")]


class RunnerAuthFailure(models.Model):
    """Messages on the ``site`` queue that failed authentication, counted per reason and claimed
    credential (only a credential that exists is recorded, so forged ids cannot grow the table)."""

    reason = models.CharField(max_length=32)
    credential = models.ForeignKey(RunnerCredential, on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="failures")
    count = models.PositiveBigIntegerField(default=0)
    first_at = models.DateTimeField(default=timezone.now)
    last_at = models.DateTimeField(default=timezone.now)
    last_task = models.CharField(max_length=100, blank=True)
    last_detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-last_at"]
        constraints = [
            models.UniqueConstraint(fields=["reason", "credential"], name="runner_auth_failure_unique"),
            models.UniqueConstraint(fields=["reason"], condition=models.Q(credential__isnull=True),
                                    name="runner_auth_failure_unique_anonymous"),
        ]

    def __str__(self) -> str:
        return f"{self.reason} x{self.count}"
