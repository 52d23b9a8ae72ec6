"""A submission: one user's source for one problem, stored with its sha256."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from evaluator.vocabulary import LANGUAGES


class SourceMismatch(ValueError):
    """The sha256 given with a source does not match the source."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: How the site names each language; the codes themselves are the evaluator's (a new one without a
#: label here stops the site at import).
LANGUAGE_LABELS = {"python": "Python", "ptx": "PTX", "cuda": "CUDA C++"}
Language = models.TextChoices(
    "Language", [(code.upper(), (code, LANGUAGE_LABELS[code])) for code in LANGUAGES]
)


class Submission(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions")
    problem = models.ForeignKey("leaderboard.Problem", on_delete=models.PROTECT, related_name="submissions")
    problem_version = models.PositiveIntegerField(help_text="Catalogue version it was submitted against.")
    language = models.CharField(max_length=8, choices=Language.choices)
    source = models.TextField()
    source_sha256 = models.CharField(max_length=64, db_index=True, editable=False)
    launch_spec = models.TextField(null=True, blank=True, help_text="PTX/CUDA launch spec, if separate.")
    static_evidence = models.JSONField(
        default=dict, blank=True,
        help_text="PTX/CUDA: what upload validation found per target (resources, instruction families, "
        "required features missing); {} for Python.",
    )
    filename = models.CharField(max_length=255, blank=True)
    public = models.BooleanField(default=False, help_text="Source visible to everyone.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(language__in=Language.values), name="submission_language_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["user", "problem", "-created_at"], name="submission_user_problem_idx")
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.problem_id} by {self.user_id}"

    def clean(self) -> None:
        size = len(self.source.encode("utf-8"))
        if size > settings.SOLBOARD_MAX_SOURCE_BYTES:
            raise ValidationError(
                {"source": f"source is {size} bytes; the limit is {settings.SOLBOARD_MAX_SOURCE_BYTES}"}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A sha256 given with a new source (an API client's integrity check) must match it.
        actual = sha256_text(self.source)
        if self._state.adding and self.source_sha256 and self.source_sha256 != actual:
            raise SourceMismatch(f"source sha256 is {actual}, not {self.source_sha256}")
        self.source_sha256 = actual
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "source" in update_fields:
            kwargs["update_fields"] = {*update_fields, "source_sha256"}
        super().save(*args, **kwargs)

    def source_intact(self) -> bool:
        """True when the stored source still hashes to the stored sha256."""
        return sha256_text(self.source) == self.source_sha256
