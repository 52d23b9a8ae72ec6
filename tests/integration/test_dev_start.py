"""`make run` on an empty ``var/`` starts every time.

The embedded broker (kombu's SQLAlchemy transport) creates its tables and queue rows lazily with a
check-then-insert; children that start together used to race on it, and the loser died with
``UNIQUE constraint failed: kombu_queue.name`` (2 of 5 starts), stopping everything.
``manage.py prepare_broker`` now creates them in the supervisor before any child starts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from leaderboard.celery import build_app
from leaderboard.management.commands.prepare_broker import prepare_queues, prepare_results
from tests.integration.dev_stack import REPO, start_dev, stop, wait_until_healthy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

#: What a child does first on the broker: the site worker declares ``site``, the runner declares
#: its GPU queue and sends a heartbeat to ``site``; all of them at the same instant.
RACER = """
import sys, time
from kombu import Connection
from solboard_common.config import broker_transport_options
url, start = sys.argv[1], float(sys.argv[2])
connection = Connection(url, transport_options=broker_transport_options(url))
while time.time() < start:
    time.sleep(0.001)
channel = connection.default_channel
channel.queue_declare(queue="site")
channel.queue_declare(queue="gpu.cpu.x1")
channel._put("site", {"body": "heartbeat"})
"""
RACERS = 6
CELERY_URL_VARIABLES = ("CELERY_BROKER_URL", "CELERY_BROKER_READ_URL", "CELERY_BROKER_WRITE_URL",
                        "CELERY_RESULT_BACKEND")
STARTS = 3


@pytest.mark.django_db
def test_children_that_start_together_on_a_prepared_broker_all_get_their_queues(
        tmp_path: Path, gpu_types: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Celery prefers these variables to the URLs an app is built with: under CI they name Redis and
    # PostgreSQL, and this test is about the embedded broker that `make run` starts on.
    for variable in CELERY_URL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    app = build_app(url, f"db+sqlite:///{tmp_path / 'results.sqlite3'}")
    assert prepare_queues(app) >= 1 + 4 * len(gpu_types)
    assert prepare_results(app)
    start = time.time() + 3.0  # every racer imported and connected before the first declares
    racers = [subprocess.Popen([sys.executable, "-c", RACER, url, str(start)], cwd=REPO,
                               stderr=subprocess.PIPE) for _ in range(RACERS)]
    failures = [racer.stderr.read().decode()[-600:] for racer in racers  # type: ignore[union-attr]
                if racer.wait(timeout=120) != 0]
    assert not failures, failures


def test_solboard_dev_starts_on_an_empty_var_every_time(tmp_path: Path) -> None:
    for attempt in range(STARTS):
        stack = start_dev(tmp_path / f"var{attempt}")
        try:
            wait_until_healthy(stack)
            _wait_for_a_stored_heartbeat(stack)
            assert stack.alive(), stack.log_tail()
        finally:
            code = stop(stack)
        log = stack.log_tail(200_000)
        assert "IntegrityError" not in log and "OperationalError" not in log, log[-4000:]
        assert code == 0, f"start {attempt + 1}: solboard dev exited {code}\n{log[-4000:]}"


def _wait_for_a_stored_heartbeat(stack: Any, timeout: float = 120.0) -> None:
    """The runner sent a heartbeat to ``site`` and the site worker stored it: both used the queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert stack.alive(), f"solboard dev stopped:\n{stack.log_tail()}"
        if stack.query("SELECT count(*) FROM leaderboard_runnernode WHERE last_heartbeat IS NOT NULL")[0][0]:
            return
        time.sleep(1)
    raise AssertionError(f"no runner heartbeat stored within {timeout:.0f}s:\n{stack.log_tail()}")
