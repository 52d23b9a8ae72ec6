"""Operator decisions about results: an evaluation withdrawn from the rankings, by whom, when, why.

The evaluator and the judge decide eligibility from what a run measured; an operator who finds
a cheat they missed withdraws the result instead of deleting it, so the decision is public on
the integrity log and on the report. The owner's appeal is a re-run: a new evaluation, judged
afresh (``leaderboard.withdrawals``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Withdrawal(models.Model):
    evaluation = models.OneToOneField(
        "leaderboard.Evaluation", on_delete=models.CASCADE, related_name="withdrawal"
    )
    withdrawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The operator's name at the time: kept if their account is later deleted or renamed.
    operator_name = models.CharField(max_length=150)
    withdrawn_at = models.DateTimeField(default=timezone.now, db_index=True)
    note = models.TextField(help_text="Why, in words shown publicly on the integrity log and the report.")

    class Meta:
        ordering = ["-withdrawn_at"]
        constraints = [models.CheckConstraint(condition=~models.Q(note=""), name="withdrawal_note_required")]

    def __str__(self) -> str:
        return f"evaluation {self.evaluation_id} withdrawn by {self.operator_name}"
