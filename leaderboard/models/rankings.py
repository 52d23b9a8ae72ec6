"""Ranking rows, maintained when results are stored, so a ranking page is one indexed query."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RankingEntry(models.Model):
    """A user's best rank-eligible result per (problem, GPU type) — or per shape when ``shape`` is set.

    Whole-problem rows order by score (geomean S, higher first); per-shape rows by median time.
    Ties go to the earlier submission. The baseline's reference row is computed by pages, not stored.
    """

    problem = models.ForeignKey("leaderboard.Problem", on_delete=models.CASCADE, related_name="ranking_entries")
    gpu_type = models.ForeignKey("leaderboard.GpuType", on_delete=models.CASCADE, related_name="ranking_entries")
    shape = models.ForeignKey(
        "leaderboard.Shape", on_delete=models.CASCADE, null=True, blank=True, related_name="ranking_entries"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ranking_entries")
    submission = models.ForeignKey("leaderboard.Submission", on_delete=models.CASCADE, related_name="+")
    evaluation = models.ForeignKey("leaderboard.Evaluation", on_delete=models.CASCADE, related_name="+")
    score = models.FloatField()
    median_us = models.FloatField(null=True, blank=True)
    submitted_at = models.DateTimeField()
    features_met = models.BooleanField(null=True, blank=True, help_text="Copied from the evaluation.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "gpu_type", "user"],
                condition=models.Q(shape__isnull=True),
                name="ranking_one_problem_row_per_user",
            ),
            models.UniqueConstraint(
                fields=["problem", "gpu_type", "shape", "user"],
                condition=models.Q(shape__isnull=False),
                name="ranking_one_shape_row_per_user",
            ),
        ]
        indexes = [
            models.Index(fields=["problem", "gpu_type", "shape", "-score", "submitted_at"], name="ranking_by_score_idx"),
            models.Index(fields=["problem", "gpu_type", "shape", "median_us", "submitted_at"], name="ranking_by_time_idx"),
        ]

    def __str__(self) -> str:
        where = f"{self.problem_id}/{self.gpu_type_id}" + (f"/{self.shape_id}" if self.shape_id else "")
        return f"{where}: user {self.user_id} {self.score:.4f}"
