"""What a submission's owner (or staff) may do to it: cancel, re-run, make public.

A re-run is a new Evaluation row per GPU type (``run_number`` + 1, same mode), never a change to a
finished one; it is also the appeal after a rejection or a withdrawal (the integrity log says so).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from leaderboard.dispatch import cancel_evaluation, enqueue_on_commit
from leaderboard.models import TERMINAL_STATUSES, Evaluation, Submission


class ActionRefused(ValueError):
    """The action does not apply now; the message says why, in words for the page."""


def cancel_submission(submission: Submission, user: Any) -> int:
    """Cancel every queued or running evaluation; how many were cancelled."""
    live = submission.evaluations.exclude(status__in=TERMINAL_STATUSES).select_related("submission", "runner")
    cancelled = sum(cancel_evaluation(evaluation, user) for evaluation in live)
    if not cancelled:
        raise ActionRefused("nothing to cancel: every evaluation has already ended")
    return cancelled


def rerun_submission(submission: Submission) -> list[Evaluation]:
    """One new evaluation per (GPU type, mode) it was evaluated in, once all have ended."""
    with transaction.atomic():
        Submission.objects.select_for_update().filter(pk=submission.pk).first()  # one re-run at a time
        runs = list(Evaluation.objects.filter(submission=submission).values("gpu_type_id", "mode")
                    .annotate(last=Max("run_number")).values_list("gpu_type_id", "mode", "last"))
        if submission.evaluations.exclude(status__in=TERMINAL_STATUSES).exists():
            raise ActionRefused("an evaluation is still queued or running: wait for it, or cancel it first")
        created = [Evaluation.objects.create(submission=submission, gpu_type_id=gpu_type_id, mode=mode,
                                             run_number=last + 1)
                   for gpu_type_id, mode, last in runs]
        if not created:
            raise ActionRefused("this submission was never evaluated: nothing to re-run")
        enqueue_on_commit(submission.user_id, sorted({e.gpu_type_id for e in created}))
    return created


def publish_submission(submission: Submission) -> bool:
    """Make the source public (cannot be undone: others may have read it). False if it already was."""
    return bool(Submission.objects.filter(pk=submission.pk, public=False).update(public=True))
