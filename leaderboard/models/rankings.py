"""Ranking rows, maintained when results are stored, so a ranking page is one indexed query."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RankingTrack(models.TextChoices):
    """Which results a ranking admits; each user holds at most one row per track.

    ``all``: every rank-eligible result. ``features``: those that meet the problem's required
    architecture features on the GPU type's target (``leaderboard.ranking_maintenance.meets_features``).
    """

    ALL = "all"
    FEATURES = "features"


class RankingEntry(models.Model):
    """A user's best rank-eligible result per (problem version, GPU type, track) — or per shape when
    ``shape`` is set.

    Whole-problem rows order by score (geomean S, higher first); per-shape rows by median time.
    Ties go to the earlier submission. The baseline's reference row is computed by pages, not stored.
    The ``features`` track is kept apart from ``all`` so that a user whose best result misses the
    required features still appears there with their best result that meets them.

    Each catalogue version of a problem has rankings of its own (``problem_version``, the version the
    submission was made against): a new version may change what S is measured against (a faster
    baseline, a tolerance), so its scores never mix with the old ones. Pages and the API show the
    current version's by default and an older one's on request; nothing is deleted.
    """

    problem = models.ForeignKey(
        "leaderboard.Problem", on_delete=models.CASCADE, related_name="ranking_entries"
    )
    problem_version = models.PositiveIntegerField(help_text="The submission's catalogue version.")
    gpu_type = models.ForeignKey(
        "leaderboard.GpuType", on_delete=models.CASCADE, related_name="ranking_entries"
    )
    shape = models.ForeignKey(
        "leaderboard.Shape", on_delete=models.CASCADE, null=True, blank=True, related_name="ranking_entries"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ranking_entries"
    )
    submission = models.ForeignKey("leaderboard.Submission", on_delete=models.CASCADE, related_name="+")
    evaluation = models.ForeignKey("leaderboard.Evaluation", on_delete=models.CASCADE, related_name="+")
    score = models.FloatField()
    median_us = models.FloatField(null=True, blank=True)
    submitted_at = models.DateTimeField()
    track = models.CharField(max_length=16, choices=RankingTrack.choices, default=RankingTrack.ALL)
    features_met = models.BooleanField(null=True, blank=True, help_text="Copied from the evaluation.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "problem_version", "gpu_type", "track", "user"],
                condition=models.Q(shape__isnull=True),
                name="ranking_one_problem_row_per_user",
            ),
            models.UniqueConstraint(
                fields=["problem", "problem_version", "gpu_type", "shape", "track", "user"],
                condition=models.Q(shape__isnull=False),
                name="ranking_one_shape_row_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(track__in=RankingTrack.values), name="ranking_track_valid"
            ),
        ]
        indexes = [
            models.Index(
                fields=["problem", "problem_version", "gpu_type", "shape", "track", "-score", "submitted_at"],
                name="ranking_by_score_idx",
            ),
            models.Index(
                fields=[
                    "problem",
                    "problem_version",
                    "gpu_type",
                    "shape",
                    "track",
                    "median_us",
                    "submitted_at",
                ],
                name="ranking_by_time_idx",
            ),
        ]

    def __str__(self) -> str:
        where = f"{self.problem_id}v{self.problem_version}/{self.gpu_type_id}" + (
            f"/{self.shape_id}" if self.shape_id else "")
        where += f" [{self.track}]"
        return f"{where}: user {self.user_id} {self.score:.4f}"
