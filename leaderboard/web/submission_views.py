"""The submission report page, its live status fragment and the owner's buttons.

``/submissions/<id>/``: public figures for everyone; the source, the log and the compiler output
only for the owner (and staff) until the owner makes the submission public. While an evaluation
is queued or running the status block polls ``/submissions/<id>/status`` every few seconds with
htmx; once everything has ended it asks the browser to reload the whole report. Without
JavaScript a ``<noscript>`` refresh does the same.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from leaderboard.dispatch import CancelNotAllowed
from leaderboard.models import Submission
from leaderboard.web.actions import ActionRefused, cancel_submission, publish_submission, rerun_submission
from leaderboard.web.highlight import highlighted
from leaderboard.web.reports import (
    agent_of,
    evaluation_view,
    live_state,
    load_submission,
    may_act,
    provisional_ids,
    static_kernels,
    visible_source,
)

#: Seconds between two polls of the live status.
POLL_SECONDS = 3


def _submission_or_404(pk: int) -> Submission:
    submission = load_submission(pk)
    if submission is None:
        raise Http404("no such submission")
    return submission


def _in_flight(submission: Submission) -> bool:
    return any(not evaluation.is_terminal for evaluation in submission.evaluations.all())


@require_GET
def submission_page(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _submission_or_404(pk)
    show_source = visible_source(submission, request.user)
    views = [evaluation_view(e, submission, details=show_source) for e in submission.evaluations.all()]
    return render(
        request,
        "web/submission.html",
        {
            "submission": submission,
            "problem": submission.problem,
            "evaluations": views,
            "agent": agent_of(submission),
            "status_rows": [(view.evaluation, view.live) for view in views],
            "provisional_ids": provisional_ids(submission.evaluations.all()),
            "show_source": show_source,
            "source": highlighted(submission.source, submission.language) if show_source else None,
            "static_kernels": static_kernels(submission, show_source),
            "can_act": may_act(submission, request.user),
            "in_flight": _in_flight(submission),
            "poll_seconds": POLL_SECONDS,
        },
    )


@require_GET
def submission_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The live status block; tells htmx to reload the page once every evaluation has ended, or
    when a provisional result came that the page does not show yet (``?provisional=`` names the
    evaluations whose provisional result it shows)."""
    submission = _submission_or_404(pk)
    in_flight = _in_flight(submission)
    showing = provisional_ids(submission.evaluations.all())
    if request.htmx and (not in_flight or showing != request.GET.get("provisional", "")):
        return HttpResponseClientRefresh()
    rows = [(evaluation, live_state(evaluation)) for evaluation in submission.evaluations.all()]
    return render(
        request,
        "web/_status.html",
        {
            "submission": submission,
            "rows": rows,
            "provisional_ids": showing,
            "in_flight": in_flight,
            "poll_seconds": POLL_SECONDS,
        },
    )


def _owner_action(request: HttpRequest, pk: int) -> Submission | HttpResponse:
    submission = Submission.objects.filter(pk=pk).first()
    if submission is None:
        raise Http404("no such submission")
    if not may_act(submission, request.user):
        return HttpResponseForbidden("only the owner of this submission may do that")
    return submission


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    found = _owner_action(request, pk)
    if isinstance(found, HttpResponse):
        return found
    try:
        count = cancel_submission(found, request.user)
        messages.success(request, f"Cancelled {count} evaluation(s).")
    except (ActionRefused, CancelNotAllowed) as refused:
        messages.error(request, str(refused))
    return redirect("submission", pk=pk)


@login_required
@require_POST
def rerun(request: HttpRequest, pk: int) -> HttpResponse:
    found = _owner_action(request, pk)
    if isinstance(found, HttpResponse):
        return found
    try:
        created = rerun_submission(found)
        messages.success(request, f"Queued {len(created)} new evaluation(s).")
    except ActionRefused as refused:
        messages.error(request, str(refused))
    return redirect("submission", pk=pk)


@login_required
@require_POST
def publish(request: HttpRequest, pk: int) -> HttpResponse:
    found = _owner_action(request, pk)
    if isinstance(found, HttpResponse):
        return found
    if request.POST.get("confirm") != "public":  # the page's confirmation step, not a stray POST
        messages.error(request, "Not made public: confirm with the button that says it cannot be undone.")
        return redirect("submission", pk=pk)
    if publish_submission(found):
        messages.success(request, "The source is now public.")
    else:
        messages.info(request, "The source was already public.")
    return redirect("submission", pk=pk)
