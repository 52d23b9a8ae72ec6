"""Probes (/healthz) and /favicon.ico. The website's pages live in ``leaderboard.web``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_GET

from leaderboard.health import check_broker, check_database


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 only when both the database and the broker answer; 503 with the error otherwise."""
    database = check_database()
    broker = check_broker(settings.CELERY_BROKER_URL)
    healthy = database["ok"] and broker["ok"]
    body = {"status": "healthy" if healthy else "unhealthy", "database": database, "broker": broker}
    return JsonResponse(body, status=200 if healthy else 503)


FAVICON = Path(settings.BASE_DIR) / "static" / "favicon.ico"


@cache_control(public=True, max_age=86400)
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask /favicon.ico whatever the page's <link rel="icon"> says: answer it, not a 404."""
    return HttpResponse(FAVICON.read_bytes(), content_type="image/x-icon")
