"""An evaluation of one submission on one GPU type in one mode, and its per-shape results.

Status changes go through one place: ``Evaluation.transition`` (an atomic conditional update),
and ``save()`` refuses a change of status the transition map does not allow, so a terminal
status never changes silently (a re-run is a new row).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from evaluator.vocabulary import MODES, Verdict
from leaderboard.signals import evaluation_finished


class EvaluationStatus(models.TextChoices):
    """The evaluator's verdicts (``evaluator.vocabulary.Verdict``) and the site's own states."""

    QUEUED = "queued"
    RUNNING = "running"
    PASSED = Verdict.PASSED.value
    FAILED = Verdict.FAILED.value
    ERROR = Verdict.ERROR.value
    TIMEOUT = Verdict.TIMEOUT.value
    REJECTED = Verdict.REJECTED.value
    CANCELLED = "cancelled"


S = EvaluationStatus
#: Which status may follow which. running -> queued is a requeue after its runner was lost.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.ERROR}),
    S.RUNNING: frozenset({S.PASSED, S.FAILED, S.ERROR, S.TIMEOUT, S.REJECTED, S.CANCELLED, S.QUEUED}),
}
TERMINAL_STATUSES = frozenset(S.values) - set(ALLOWED_TRANSITIONS)


class IllegalTransition(ValueError):
    """A status change the transition map does not allow."""


def transition_allowed(current: str, new: str) -> bool:
    return new in ALLOWED_TRANSITIONS.get(current, frozenset())


def new_secret_seed() -> int:
    """63 random bits from the OS: fits a signed BIGINT on every database."""
    return secrets.randbits(63)


Mode = models.TextChoices("Mode", [(mode.upper(), mode) for mode in MODES])  # TEST, RANKED


class Evaluation(models.Model):
    submission = models.ForeignKey(
        "leaderboard.Submission", on_delete=models.CASCADE, related_name="evaluations"
    )
    gpu_type = models.ForeignKey("leaderboard.GpuType", on_delete=models.PROTECT, related_name="evaluations")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    run_number = models.PositiveIntegerField(default=1, help_text="A re-run is a new row.")
    shape_selection = models.CharField(max_length=8, default="all", help_text="all, quick or ranked.")
    status = models.CharField(max_length=16, choices=EvaluationStatus.choices, default=S.QUEUED)
    evaluator_status = models.CharField(max_length=32, null=True, blank=True, help_text="e.g. PASSED.")
    message = models.TextField(blank=True)
    runner = models.ForeignKey(
        "leaderboard.RunnerNode", on_delete=models.SET_NULL, null=True, blank=True, related_name="evaluations"
    )
    queue = models.CharField(max_length=64, blank=True, help_text="Broker queue it was sent to.")
    job_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    priority = models.IntegerField(default=0, help_text="Higher runs first where the broker allows.")
    secret_seed = models.BigIntegerField(default=new_secret_seed, editable=False)
    queued_at = models.DateTimeField(default=timezone.now)
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="Null until handed to the broker.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    report = models.JSONField(null=True, blank=True)
    log = models.TextField(blank=True)
    telemetry = models.JSONField(default=dict, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="Geomean S over ranked shapes.")
    rank_eligible = models.BooleanField(default=False)
    flags = models.JSONField(default=list, blank=True)
    features_met = models.BooleanField(
        null=True, blank=True,
        help_text="The report's evidence shows every architecture feature the problem requires here; "
        "null when it requires none or the report has no evidence (Python).",
    )
    #: A ranked job's report when its ranked stage ended, before the witness, as the site judged
    #: it: shown while the evaluation runs, never ranked (report, score, rank_eligible and the
    #: ShapeResults are the final result's alone).
    provisional_report = models.JSONField(null=True, blank=True,
                                          help_text="Before the witness; shown while running, never ranked.")
    provisional_at = models.DateTimeField(
        null=True, blank=True, help_text="When the provisional report came."
    )
    #: GPU time its job used (``leaderboard/gpu_time.py``): the seconds the job held its GPUs, by
    #: the runner's clock bounded by the site's, times the GPU count. Null until a runner's result
    #: ended it (and for evaluations the sweeper ended: no runner reported).
    gpu_seconds = models.FloatField(null=True, blank=True,
                                    help_text="Seconds its job held its GPUs, times the GPU count.")

    class Meta:
        ordering = ["-queued_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "gpu_type", "mode", "run_number"], name="evaluation_unique_run"
            ),
            models.CheckConstraint(condition=models.Q(status__in=S.values), name="evaluation_status_valid"),
            models.CheckConstraint(condition=models.Q(mode__in=Mode.values), name="evaluation_mode_valid"),
        ]
        indexes = [
            models.Index(fields=["status", "queued_at"], name="evaluation_status_queued_idx"),
            models.Index(fields=["gpu_type", "status"], name="evaluation_gpu_status_idx"),
            # The problem page's provisional list: newest passed ranked results not (yet) eligible.
            models.Index(fields=["gpu_type", "-finished_at", "-id"], name="evaluation_provisional_idx",
                         condition=models.Q(mode="ranked", status="passed", rank_eligible=False)),
        ]

    def __str__(self) -> str:
        return f"evaluation {self.pk} ({self.mode} on {self.gpu_type_id}: {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def current_provisional(self) -> dict[str, Any] | None:
        """The provisional report of the attempt now running, or None: once the evaluation ended,
        its final result is what counts; after a requeue, the earlier attempt's report is not it."""
        if self.status != S.RUNNING or self.provisional_report is None or self.provisional_at is None:
            return None
        if self.started_at is not None and self.provisional_at < self.started_at:
            return None
        return self.provisional_report  # type: ignore[no-any-return]

    def transition(self, new: str, *, expected: tuple[str, ...] | None = None, **fields: Any) -> bool:
        """Move to ``new`` if the row's current status allows it, atomically; False otherwise.

        ``expected`` narrows the statuses it may come from (e.g. claim only a queued row).
        Timestamps follow the status; ``fields`` are written in the same UPDATE.
        """
        allowed_from = [old for old, targets in ALLOWED_TRANSITIONS.items() if new in targets]
        if not allowed_from:
            raise IllegalTransition(f"nothing may move to {new!r}")
        if expected is not None:
            allowed_from = [old for old in allowed_from if old in expected]
        values = {**_timestamps_for(new), **fields, "status": new}
        updated = Evaluation.objects.filter(pk=self.pk, status__in=allowed_from).update(**values)
        if updated:
            self.refresh_from_db()
            if new in TERMINAL_STATUSES:  # webhooks (leaderboard.api.webhooks) listen to this
                evaluation_finished.send(sender=Evaluation, evaluation=self)
        return bool(updated)

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if self._state.adding or (update_fields is not None and "status" not in update_fields):
            super().save(*args, **kwargs)
            return
        with transaction.atomic():
            current = (
                Evaluation.objects.select_for_update()
                .filter(pk=self.pk)
                .values_list("status", flat=True)
                .first()
            )
            if (
                current is not None
                and current != self.status
                and not transition_allowed(current, self.status)
            ):
                raise IllegalTransition(
                    f"evaluation {self.pk}: {current} -> {self.status} is not allowed "
                    "(a terminal status never changes; re-run as a new evaluation)"
                )
            super().save(*args, **kwargs)


def _timestamps_for(status: str) -> dict[str, Any]:
    now = timezone.now()
    if status == S.RUNNING:
        return {"started_at": now, "finished_at": None}
    if status == S.QUEUED:  # requeued after a lost runner: it starts over
        return {"started_at": None, "enqueued_at": None, "runner": None, "queued_at": now}
    return {"finished_at": now}


class ShapeResult(models.Model):
    """One shape of one evaluation, from the evaluator's ShapeReport (performance iff passed)."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="shape_results")
    shape = models.ForeignKey("leaderboard.Shape", on_delete=models.PROTECT, related_name="results")
    status = models.CharField(max_length=32, help_text="Evaluator Status, e.g. PASSED.")
    correct = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    errors = models.JSONField(default=dict, blank=True)
    checks = models.JSONField(default=list, blank=True)
    median_us = models.FloatField(null=True, blank=True)
    mean_us = models.FloatField(null=True, blank=True)
    min_us = models.FloatField(null=True, blank=True)
    max_us = models.FloatField(null=True, blank=True)
    std_us = models.FloatField(null=True, blank=True)
    n = models.PositiveIntegerField(null=True, blank=True)
    ci95_low_us = models.FloatField(null=True, blank=True)
    ci95_high_us = models.FloatField(null=True, blank=True)
    timing_method = models.CharField(max_length=16, blank=True)
    baseline_median_us = models.FloatField(null=True, blank=True)
    t_sol_us = models.FloatField(null=True, blank=True)
    sol_fraction = models.FloatField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    tflops = models.FloatField(null=True, blank=True)
    gbps = models.FloatField(null=True, blank=True)
    telemetry = models.JSONField(default=dict, blank=True)
    profile = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["evaluation", "shape__position"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "shape"], name="shape_result_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.evaluation_id}:{self.shape_id} {self.status}"
