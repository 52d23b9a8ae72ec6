"""The agent beside the user: which program (name, version, model) made a submission, as the API
token it was made with says (``SubmissionOrigin``). Shown, never trusted for anything."""

from __future__ import annotations

from collections.abc import Iterable

from leaderboard.models import SubmissionOrigin


def agent_label(name: str, model: str, version: str) -> str:
    """``my-agent 1.2 (some-model)``; '' when the token named no agent."""
    label = " ".join(part for part in (name, version) if part)
    if model:
        label = f"{label} ({model})" if label else model
    return label


def agents_of(submission_ids: Iterable[int | None]) -> dict[int, str]:
    """The agent label of each submission that names one, in one query."""
    ids = {pk for pk in submission_ids if pk is not None}
    if not ids:
        return {}
    rows = SubmissionOrigin.objects.filter(submission_id__in=ids).values_list(
        "submission_id", "agent_name", "agent_model", "agent_version")
    labels = {pk: agent_label(name, model, version) for pk, name, model, version in rows}
    return {pk: label for pk, label in labels.items() if label}
