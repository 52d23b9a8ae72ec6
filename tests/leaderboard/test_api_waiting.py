"""Waiting without spinning, against the real ASGI app under uvicorn: long-poll returns at once on
a change of status, SSE streams each change, and many waiters leave the other endpoints responsive.

The cast (tests/conftest.py): alice waits on her submission; the test plays the runner by moving
the evaluation through its statuses.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import uvicorn

from leaderboard.models import ApiToken, Evaluation
from tests.leaderboard.api_support import catalogue, finish, submit_body

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["catalogue"]


@pytest.fixture
def server(catalogue: None, settings: Any) -> Iterator[str]:
    """uvicorn serving leaderboard.asgi in this process (same test database), on a free port."""
    from leaderboard.asgi import application

    settings.SOLBOARD_WAIT_POLL_SECONDS = 0.1
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not instance.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def token(alice: Any) -> str:
    return ApiToken.issue(alice)[1]


def call(base: str, token: str, path: str, body: dict[str, Any] | None = None,
         timeout: float = 30) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        base + path,
        data=data,
        method="POST" if data else "GET",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def submitted(server: str, token: str) -> int:
    status, _, body = call(server, token, "/api/submissions", submit_body())
    assert status == 201, body
    return int(body["id"])


def later(seconds: float, action: Any) -> threading.Timer:
    """Run ``action`` in another thread after ``seconds`` (closing that thread's connection)."""
    from django.db import connection

    def run() -> None:
        try:
            action()
        finally:
            connection.close()

    timer = threading.Timer(seconds, run)
    timer.start()
    return timer


def test_a_long_poll_returns_as_soon_as_the_status_changes(server: str, token: str) -> None:
    submission_id = submitted(server, token)
    known = call(server, token, f"/api/submissions/{submission_id}")[2]["state"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    later(0.5, lambda: evaluation.transition("running"))
    started = time.monotonic()
    # ``since``: should the request reach the server after the change, it still ends "changed".
    status, headers, body = call(server, token, f"/api/submissions/{submission_id}?wait=20&since={known}")
    elapsed = time.monotonic() - started
    assert status == 200 and body["status"] == "running" and headers["X-Wait-Outcome"] == "changed"
    assert 0.4 < elapsed < 5


def test_a_long_poll_without_a_change_answers_after_the_wait(server: str, token: str) -> None:
    submission_id = submitted(server, token)
    started = time.monotonic()
    status, headers, body = call(server, token, f"/api/submissions/{submission_id}?wait=1")
    assert status == 200 and headers["X-Wait-Outcome"] == "timeout" and body["status"] == "queued"
    assert 0.9 < time.monotonic() - started < 5


def test_a_long_poll_answers_at_once_when_the_client_is_behind_or_it_is_finished(
    server: str, token: str
) -> None:
    submission_id = submitted(server, token)
    _, _, before = call(server, token, f"/api/submissions/{submission_id}")
    Evaluation.objects.get(submission_id=submission_id).transition("running")
    started = time.monotonic()
    _, headers, body = call(
        server, token, f"/api/submissions/{submission_id}?wait=30&since={before['state']}"
    )
    assert body["status"] == "running" and time.monotonic() - started < 3
    assert headers["X-Wait-Outcome"] == "changed"
    finish(Evaluation.objects.get(submission_id=submission_id), "failed")
    started = time.monotonic()
    assert call(server, token, f"/api/submissions/{submission_id}?wait=30")[2]["status"] == "finished"
    assert time.monotonic() - started < 3


def test_a_long_poll_refuses_a_bad_wait_and_an_unknown_submission(server: str, token: str) -> None:
    submission_id = submitted(server, token)
    for wait in ("61", "-1", "soon", "nan"):
        status, _, body = call(server, token, f"/api/submissions/{submission_id}?wait={wait}")
        assert (status, body["error"]["code"], body["error"]["field"]) == (400, "invalid_wait", "wait")
    status, _, body = call(server, token, "/api/submissions/999999?wait=30", timeout=5)
    assert (status, body["error"]["code"]) == (404, "not_found")


def read_events(base: str, token: str, path: str, count: int) -> list[tuple[str, dict[str, Any]]]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=20)
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    while len(events) < count:
        line = response.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
    connection.close()
    return events


def test_server_sent_events_follow_the_submission_to_its_end(server: str, token: str) -> None:
    submission_id = submitted(server, token)
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    later(0.5, lambda: evaluation.transition("running"))
    later(1.2, lambda: Evaluation.objects.get(pk=evaluation.pk).transition("failed", message="wrong answer"))
    events = read_events(server, token, f"/api/submissions/{submission_id}/events", 4)
    assert [name for name, _ in events] == ["status", "status", "status", "end"]
    assert [data["status"] for _, data in events] == ["queued", "running", "finished", "finished"]
    assert events[2][1]["evaluations"][0]["message"] == "wrong answer"


def database_sessions() -> int:
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def test_many_waiters_leave_the_other_endpoints_responsive(server: str, token: str) -> None:
    submission_id = submitted(server, token)
    known = call(server, token, f"/api/submissions/{submission_id}")[2]["state"]
    sessions_before = database_sessions()
    with ThreadPoolExecutor(max_workers=60) as pool:
        # ``since``: a waiter whose request reaches the server only after the change (a loaded CI
        # machine) answers at once instead of waiting for a second change that never comes.
        waiters = [pool.submit(call, server, token, f"/api/submissions/{submission_id}?wait=20&since={known}")
                   for _ in range(50)]
        time.sleep(1.0)  # most of the 50 are waiting now
        assert database_sessions() - sessions_before < 10  # a waiting request holds no database connection
        started = time.monotonic()
        status, _, problems = call(server, token, "/api/problems")
        assert status == 200 and problems and time.monotonic() - started < 3
        Evaluation.objects.get(submission_id=submission_id).transition("running")
        outcomes = [future.result(timeout=30)[1]["X-Wait-Outcome"] for future in waiters]
    assert outcomes == ["changed"] * 50


def test_a_failed_read_of_the_states_does_not_strand_the_waiters(monkeypatch: pytest.MonkeyPatch) -> None:
    from leaderboard.api import waiting

    reads = {"count": 0}

    def flaky_read(submission_ids: list[int]) -> dict[int, str]:
        reads["count"] += 1
        if reads["count"] == 1:
            raise RuntimeError("connection refused")
        return {pk: "new" for pk in submission_ids}

    monkeypatch.setattr(waiting, "current_states", flaky_read)

    async def wait() -> bool:
        return await waiting.StatusWatcher().wait_for_change(7, "old", timeout=5)

    started = time.monotonic()
    assert asyncio.run(wait()) is True
    assert reads["count"] == 2 and time.monotonic() - started < 2


def test_a_waiter_that_arrives_while_the_states_are_read_is_not_woken_by_that_read() -> None:
    from leaderboard.api.waiting import to_wake

    loop = asyncio.new_event_loop()
    try:
        known, late, behind = loop.create_future(), loop.create_future(), loop.create_future()
        waiters = {1: [("s1", known), ("old", behind)], 2: [("s2", late)]}
        assert to_wake({1: "s1"}, waiters) == [(behind, "s1")]  # 2 was not read this round
        assert to_wake({1: "s1", 2: "s2"}, waiters) == [(behind, "s1")]
    finally:
        loop.close()
