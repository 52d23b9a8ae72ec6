"""Error pages that say what went wrong in words (wired as ``handler400`` in leaderboard/urls.py)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.defaults import bad_request as django_bad_request


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A body larger than the site reads is a 413 with the limit; anything else Django's 400."""
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return render(request, "web/too_large.html", {"limit": limit, "limit_kib": limit // 1024}, status=413)
    return django_bad_request(request, exception or Exception())
