"""Reference lines: the kernels people know (the eager baseline, torch.compile, a library's kernel),
measured on a GPU type like a submission and shown labelled beside the rankings, never ranked.

One row per (problem, catalogue version, GPU type, label): the line's description (from
``evaluator.references``) and the submission and evaluation that measured it. The figures are the
evaluation's own (its ShapeResults, as the site judged them); the row adds what a page needs to
label them. ``leaderboard/reference_lines.py`` creates the rows (``measure_references``) and reads
them back for the pages and the API.
"""

from __future__ import annotations

from typing import Any

from django.db import models

#: The system account that submits reference lines (inactive: nobody logs in as it). Every
#: submission of it is a reference line: never ranked.
REFERENCE_USER = "solboard-references"


def is_reference_submission(submission: Any) -> bool:
    return bool(submission.user.get_username() == REFERENCE_USER)


class ReferenceLine(models.Model):
    class State(models.TextChoices):
        SUBMITTED = "submitted", "submitted to a runner"
        NEEDS_GPU = "needs_gpu", "needs a GPU runner"

    class Kind(models.TextChoices):
        BASELINE = "baseline", "the baseline as a submission"
        COMPILED = "compiled", "the baseline under torch.compile"
        LIBRARY = "library", "a library's kernel"

    problem = models.ForeignKey(
        "leaderboard.Problem", on_delete=models.CASCADE, related_name="reference_lines"
    )
    problem_version = models.PositiveIntegerField(help_text="The catalogue version it was measured against.")
    gpu_type = models.ForeignKey(
        "leaderboard.GpuType", on_delete=models.CASCADE, related_name="reference_lines"
    )
    label = models.SlugField(max_length=32, help_text="eager, torch_compile, liger, flash_attn, ...")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    source_path = models.CharField(
        max_length=255, help_text="The source (or its template) in the repository."
    )
    source_sha256 = models.CharField(max_length=64, help_text="Of the source submitted.")
    package = models.CharField(max_length=64, blank=True, help_text="The library's pip name, if any.")
    url = models.URLField(blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.SUBMITTED)
    submission = models.ForeignKey("leaderboard.Submission", on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="reference_lines")
    evaluation = models.ForeignKey("leaderboard.Evaluation", on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="reference_lines")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["problem", "gpu_type", "id"]
        constraints = [
            models.UniqueConstraint(fields=["problem", "problem_version", "gpu_type", "label"],
                                    name="reference_line_unique"),
            models.CheckConstraint(condition=models.Q(kind__in=["baseline", "compiled", "library"]),
                                   name="reference_line_kind_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.problem_id}v{self.problem_version}/{self.gpu_type_id}: {self.label}"
