"""Runner health: a page (``/runners/``) and an API endpoint (``/api/runners/``).

Each runner (a slot of a node: ``<node>:<slot>``) with its last contact, alive or stale, GPUs,
queue and current evaluation; and the depth of each GPU type's queue (waiting on the site behind
the per-user limit, handed to the broker, running). Host names are shown to staff only.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api.presenters import evaluation_label
from leaderboard.dispatch.enqueue import max_inflight_per_user, pending_counts
from leaderboard.models import GpuType, RunnerNode


def runner_rows(staff: bool) -> list[dict[str, Any]]:
    now = timezone.now()
    rows = []
    for node in RunnerNode.objects.select_related("gpu_type", "current_evaluation__gpu_type").order_by(
        "name"
    ):
        age = (now - node.last_heartbeat).total_seconds() if node.last_heartbeat else None
        rows.append({
            "name": node.name,
            "hostname": node.hostname if staff else None,
            "gpu_type": node.gpu_type.key if node.gpu_type else None,
            "development_device": bool(node.gpu_type and node.gpu_type.development_device),
            "gpu_count": node.gpu_count,
            "gpus": [{"index": g.get("index"), "name": g.get("name"), "memory_bytes": g.get("memory_bytes")}
                     for g in node.gpus],
            "queues": node.queues,
            "driver": node.driver,
            "alive": node.is_alive,
            "last_heartbeat": node.last_heartbeat.isoformat() if node.last_heartbeat else None,
            "seconds_since_contact": round(age, 1) if age is not None else None,
            "current_evaluation": node.current_evaluation_id,
            **_current_job(node),
        })
    return rows


def _current_job(node: RunnerNode) -> dict[str, Any]:
    """The job a runner runs, named as people see it: its submission (``current_evaluation`` is
    the evaluation's own id, for programs)."""
    evaluation = node.current_evaluation
    if evaluation is None:
        return {"current_submission": None, "current_label": None}
    return {"current_submission": evaluation.submission_id, "current_label": evaluation_label(evaluation)}


def queue_rows() -> list[dict[str, Any]]:
    depth = pending_counts()
    labels = {gpu.key: gpu for gpu in GpuType.objects.all()}
    keys = sorted(set(depth) | {key for key, gpu in labels.items()}, key=lambda k: (k == "cpu", k))
    return [{"gpu_type": key, "development_device": bool(labels.get(key) and labels[key].development_device),
             **depth.get(key, {"waiting": 0, "in_broker": 0, "running": 0})} for key in keys]


def health(staff: bool) -> dict[str, Any]:
    return {"stale_after_seconds": settings.SOLBOARD_RUNNER_STALE_SECONDS,
            "max_inflight_per_user": max_inflight_per_user(),
            "runners": runner_rows(staff), "queues": queue_rows()}


@require_GET
def runner_health_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runners/health.html", health(request.user.is_staff))


class RunnerHealthView(APIView):
    """Runner health and queue depth per GPU type (read-only, public; host names for staff)."""

    permission_classes = (AllowAny,)

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(health(bool(request.user and request.user.is_staff)))


urlpatterns = [
    path("runners/", runner_health_page, name="runner-health"),
    path("api/runners/", RunnerHealthView.as_view(), name="api-runners"),
]
