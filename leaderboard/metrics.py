"""``GET /metrics``: the site's Prometheus metrics (prometheus-client's text format).

- **Request latency** (``solboard_http_request_duration_seconds``): a histogram per method, URL
  route (the pattern, never the raw path: bounded cardinality) and status class, measured by
  ``RequestLatencyMiddleware`` in every web process. With several processes (``uvicorn --workers
  N``) set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder shared by them: each process writes its
  samples there and the endpoint adds them up, whichever process answers the scrape.
- **From the database, at scrape time** (the same answer from every process): evaluations queued
  per GPU type (queue depth), evaluations by GPU type and status (jobs by outcome), witness
  rejections, runner nodes and the age of each one's last heartbeat.

The endpoint is not public: with ``SOLBOARD_METRICS_TOKEN`` set it wants ``Authorization: Bearer
<token>``; without, it answers only to loopback addresses (a Prometheus beside the site). Anyone
else gets a 404, as if it did not exist.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from leaderboard.middleware import HybridMiddleware

#: Buckets from a cached page (a few ms) to a compile-bound create or a long-poll (a minute).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REQUEST_LATENCY = Histogram("solboard_http_request_duration_seconds", "Time to answer an HTTP request.",
                            ["method", "route", "status"], buckets=LATENCY_BUCKETS)
#: A rejection whose message says the witness did not confirm the timing (docs/security.md, section 2).
WITNESS_REJECTION = Q(status="rejected") & (
    Q(message__icontains="not confirmed") | Q(message__icontains="witness")
)


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    return f"/{match.route}" if match is not None and match.route else "unmatched"


class RequestLatencyMiddleware(HybridMiddleware):
    """Times every request (first in the chain, so the page cache's answers count too)."""

    def call(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response: HttpResponse = self.get_response(request)
        self._observe(request, response, started)
        return response

    async def acall(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response: HttpResponse = await self.get_response(request)
        self._observe(request, response, started)
        return response

    @staticmethod
    def _observe(request: HttpRequest, response: HttpResponse, started: float) -> None:
        status = f"{response.status_code // 100}xx"
        REQUEST_LATENCY.labels(request.method or "", _route(request), status).observe(
            time.perf_counter() - started
        )


class DatabaseCollector(Collector):
    """Gauges read from the database when Prometheus scrapes."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from leaderboard.models import Evaluation, RunnerNode

        queued = GaugeMetricFamily(
            "solboard_queue_depth", "Evaluations queued, per GPU type.", labels=["gpu_type"]
        )
        outcomes = GaugeMetricFamily(
            "solboard_evaluations",
            "Evaluations per GPU type and status (jobs by outcome).",
            labels=["gpu_type", "status"],
        )
        for row in Evaluation.objects.values("gpu_type__key", "status").annotate(n=Count("id")):
            outcomes.add_metric([row["gpu_type__key"], row["status"]], row["n"])
            if row["status"] == "queued":
                queued.add_metric([row["gpu_type__key"]], row["n"])
        yield queued
        yield outcomes
        yield GaugeMetricFamily(
            "solboard_witness_rejections",
            "Evaluations rejected because the witness did not confirm their timing.",
            value=Evaluation.objects.filter(WITNESS_REJECTION).count(),
        )
        yield self._heartbeats(RunnerNode.objects.values_list("name", "gpu_type__key", "last_heartbeat"))

    @staticmethod
    def _heartbeats(nodes: Any) -> GaugeMetricFamily:
        ages = GaugeMetricFamily(
            "solboard_runner_heartbeat_age_seconds",
            "Seconds since each runner's last heartbeat (stale past SOLBOARD_RUNNER_STALE_SECONDS).",
            labels=["runner", "gpu_type"],
        )
        now = timezone.now()
        for name, gpu_type, last in nodes:
            if last is not None:
                ages.add_metric([name, gpu_type or ""], (now - last).total_seconds())
        return ages


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # every web process's request samples
    else:
        registry.register(REQUEST_LATENCY)
    registry.register(DatabaseCollector())
    return registry


def allowed(request: HttpRequest) -> bool:
    token = str(settings.SOLBOARD_METRICS_TOKEN)
    if token:
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        raise Http404("no such page")
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
