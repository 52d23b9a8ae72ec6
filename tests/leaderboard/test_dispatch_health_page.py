"""The runner-health page in a real browser (headless Chromium through Playwright), and its API.

The page must show each runner as alive or stale with its GPU type and current evaluation, and
the depth of each GPU type's queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from leaderboard.models import Evaluation, GpuType, RunnerNode, Submission

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def fleet(alice: Any, gpu_types: dict[str, GpuType], problems: Any) -> Evaluation:
    """Two runners: one alive and busy with alice's evaluation, one silent for ten minutes."""
    cpu = gpu_types["cpu"]
    Submission.objects.create(
        user=alice,
        problem=problems["vector_add"],
        problem_version=1,
        language="python",
        source="def kernel(a, b, c): pass\n",
    )  # so that ids of the two kinds differ
    submission = Submission.objects.create(user=alice, problem=problems["vector_add"], problem_version=1,
                                           language="python", source="def kernel(a, b, c): pass\n")
    running = Evaluation.objects.create(submission=submission, gpu_type=cpu, mode="test", status="running",
                                        enqueued_at=timezone.now())
    Evaluation.objects.create(submission=submission, gpu_type=cpu, mode="ranked")  # waiting on the site
    RunnerNode.objects.create(name="node-a:cpu", hostname="host-a", gpu_type=cpu, queues=["gpu.cpu.x1"],
                              last_heartbeat=timezone.now(), current_evaluation=running,
                              current_job_id=str(running.job_id))
    RunnerNode.objects.create(name="node-b:gpu0", hostname="host-b", gpu_type=gpu_types["h200"],
                              queues=["gpu.h200.x1"], last_heartbeat=timezone.now() - timedelta(minutes=10),
                              gpus=[{"index": 0, "name": "NVIDIA H200", "memory_bytes": 150 << 30}])
    return running


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_runner_health_page_shows_alive_and_stale_runners_and_queue_depth(
        fleet: Evaluation, live_server: Any, page: Any) -> None:
    page.goto(f"{live_server.url}/runners/")
    alive, stale = page.locator('tr[data-runner="node-a:cpu"]'), page.locator('tr[data-runner="node-b:gpu0"]')
    assert alive.locator("td.state").inner_text() == "alive"
    assert fleet.pk != fleet.submission_id
    current = alive.locator("td.current a")  # one id per thing: the submission, as the report page has it
    assert current.inner_text() == f"submission {fleet.submission_id}, cpu test run 1"
    assert current.get_attribute("href") == f"/submissions/{fleet.submission_id}/#evaluation-{fleet.pk}"
    assert stale.locator("td.state").inner_text() == "stale"
    assert (
        "NVIDIA H200" in stale.inner_text() and "host-b" not in stale.inner_text()
    )  # host names: staff only
    cpu_queue = page.locator('tr[data-gpu-type="cpu"] td').all_inner_texts()
    assert cpu_queue[1:] == ["1", "0", "1"]  # waiting, in broker, running


def test_the_runner_health_api_reports_the_same_figures(fleet: Evaluation, client: Any) -> None:
    body = client.get("/api/runners/").json()
    runners = {runner["name"]: runner for runner in body["runners"]}
    assert runners["node-a:cpu"]["alive"] and not runners["node-b:gpu0"]["alive"]
    assert (
        runners["node-a:cpu"]["current_evaluation"] == fleet.pk and runners["node-a:cpu"]["hostname"] is None
    )
    assert runners["node-a:cpu"]["current_submission"] == fleet.submission_id
    assert runners["node-a:cpu"]["current_label"] == f"submission {fleet.submission_id}, cpu test run 1"
    queues = {queue["gpu_type"]: queue for queue in body["queues"]}
    assert (queues["cpu"]["waiting"], queues["cpu"]["running"]) == (1, 1)
    assert queues["cpu"]["development_device"] and not queues["h200"]["development_device"]


def test_staff_see_runner_host_names(fleet: Evaluation, client: Any, operator: Any) -> None:
    client.force_login(operator)
    body = client.get("/api/runners/").json()
    assert {runner["hostname"] for runner in body["runners"]} == {"host-a", "host-b"}
