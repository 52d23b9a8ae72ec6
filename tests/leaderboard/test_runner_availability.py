"""A job for a GPU type that no live runner serves: said at submit time (API answer, dry run,
upload form) and on the report, instead of a queue position that never moves.

A runner serves a queue when its last heartbeat is recent and it consumes that queue; a
multi-GPU problem's jobs need a runner of the type with that many GPUs.

The cast (tests/conftest.py): alice submits; node-a is a CPU runner, alive or silent as a test needs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard.models import GpuType, RunnerNode
from leaderboard.queues import availability, unserved
from tests.leaderboard.api_support import catalogue, client_for, submit_body

__all__ = ["catalogue"]  # a fixture used by name
pytestmark = pytest.mark.django_db


def runner(gpu_key: str, queues: list[str], silent_for: timedelta = timedelta(0)) -> RunnerNode:
    return RunnerNode.objects.create(name=f"node-a:{gpu_key}", gpu_type=GpuType.objects.get(key=gpu_key),
                                     queues=queues, last_heartbeat=timezone.now() - silent_for)


def test_a_queue_is_served_only_by_a_live_runner_that_consumes_it(catalogue: None, settings: Any) -> None:
    assert not availability("cpu", 1).served
    runner("cpu", ["gpu.cpu.x1"], silent_for=timedelta(seconds=settings.SOLBOARD_RUNNER_STALE_SECONDS + 5))
    assert not availability("cpu", 1).served  # stale
    RunnerNode.objects.update(last_heartbeat=timezone.now())
    assert availability("cpu", 1).runners == 1
    assert not availability("cpu", 2).served  # a two-rank job needs gpu.cpu.x2
    assert [found.gpu_type for found in unserved(["cpu", "h100", "cpu"], 1)] == ["h100"]


def test_the_api_answers_a_warning_when_no_runner_serves_a_gpu_type(alice: Any, catalogue: None) -> None:
    runner("cpu", ["gpu.cpu.x1", "gpu.cpu.x2"])
    api = client_for(alice)
    body = api.post("/api/submissions", submit_body(gpu_types=["cpu", "h100"]), format="json").json()
    assert [(w["code"], w["gpu_type"]) for w in body["warnings"]] == [("no_runner", "h100")]
    assert "no runner for h100 is online" in body["warnings"][0]["message"]
    online = {e["gpu_type"]: e["runners_online"] for e in body["evaluations"]}
    assert online == {"cpu": 1, "h100": 0}
    dry = api.post("/api/submissions/validate", submit_body(gpu_types=["h100"]), format="json").json()
    assert [w["gpu_type"] for w in dry["warnings"]] == ["h100"]
    served = api.post("/api/submissions", submit_body(gpu_types=["cpu"]), format="json").json()
    assert served["warnings"] == []


def test_the_report_page_says_no_runner_is_online_and_gives_no_wait_estimate(alice: Any, catalogue: None,
                                                                             client: Client) -> None:
    body = client_for(alice).post("/api/submissions", submit_body(gpu_types=["h100"]), format="json").json()
    page = client.get(f"/submissions/{body['id']}/").content.decode()
    assert "No runner for h100 is online (queue gpu.h100.x1): the evaluation stays queued" in page
    assert "to wait" not in page


def test_the_upload_form_marks_gpu_types_without_a_runner_and_warns_after_submitting(
        alice: Any, catalogue: None, client: Client, settings: Any) -> None:
    runner("cpu", ["gpu.cpu.x1"])
    client.force_login(alice)
    form = client.get("/submit/").content.decode()
    assert "NVIDIA H100" in form and "— no runner online" in form
    assert "(development, CPU) — no runner" not in form
    response = client.post(
        "/submit/",
        {
            "problem": "vector_add",
            "language": "python",
            "gpu_types": ["cpu", "h100"],
            "source": submit_body()["source"],
            "mode": "test",
        },
        follow=True,
    )
    text = response.content.decode()
    assert response.redirect_chain and "No runner for h100 is online" in text
    assert "No runner for cpu" not in text
