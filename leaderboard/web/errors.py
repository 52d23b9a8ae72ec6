"""Error pages that say what went wrong in words (wired as ``handler400`` in leaderboard/urls.py)."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.defaults import bad_request as django_bad_request

from leaderboard.web.upload import too_large_page


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A body larger than the site reads is a 413 with the limit; anything else Django's 400."""
    if isinstance(exception, RequestDataTooBig):
        return too_large_page(request, None)
    return django_bad_request(request, exception or Exception())
