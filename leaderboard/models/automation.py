"""What the API keeps for programs that submit: where a submission came from, the idempotency
keys of create requests, and the webhook deliveries owed to callback URLs.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class SubmissionOrigin(models.Model):
    """The token (and the agent it named) a submission was made with, copied at submission time
    so a later change or revocation of the token does not rewrite history."""

    submission = models.OneToOneField(
        "leaderboard.Submission", on_delete=models.CASCADE, related_name="origin"
    )
    token = models.ForeignKey(
        "leaderboard.ApiToken", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    agent_name = models.CharField(max_length=100, blank=True)
    agent_model = models.CharField(max_length=100, blank=True)
    agent_version = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"origin of {self.submission_id}: {self.agent_name or 'no agent'}"


class IdempotencyRecord(models.Model):
    """One ``Idempotency-Key`` of one user: the request it answered and what it created.

    A retry with the same key and the same body gets the original answer; a different body
    under the same key is refused (409). Unique per user: concurrent retries serialise on it.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=32, help_text="create or batch.")
    request_sha256 = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    submission = models.ForeignKey(
        "leaderboard.Submission", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    response = models.JSONField(default=dict, blank=True, help_text="Batch: the per-item results.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key} -> {self.endpoint}"


class WebhookDelivery(models.Model):
    """One POST owed to a token's callback URL for one evaluation's terminal status."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    evaluation = models.ForeignKey("leaderboard.Evaluation", on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(
        "leaderboard.ApiToken", on_delete=models.CASCADE, related_name="webhook_deliveries"
    )
    url = models.URLField(max_length=500)
    payload = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # Set while one sender's POST is in flight (claimed without holding a transaction open across the
    # network); a sender that died leaves it to expire, then the delivery is due again.
    sending_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "token"], name="webhook_one_delivery_per_evaluation"
            ),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="webhook_due_idx")]

    def __str__(self) -> str:
        return f"webhook {self.pk} for evaluation {self.evaluation_id}: {self.state}"
