"""Shared test cast and helpers.

The cast (database tests only):
- alice: an ordinary user; she submits kernels and may see her own sources and reports.
- bob: another ordinary user; he may see alice's rankings and reports, never her private source.
- operator: a superuser; sees everything in the admin, except secrets (seeds, token hashes).
- gpu_types / problems: the real evaluator/gpus.toml and catalogue, synced as `make run` does.
- broker: an embedded broker of the test's own; user: a job user claimed from the runners' pool.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runners import sandbox
from runners.slots import claim_job_user


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    """Each test starts with an empty Django cache: request rates (leaderboard/throttling.py) and
    cached pages counted by one test never reach the next."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="bob", password="bob-password-1")


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser(username="operator", password="operator-password-1")


@pytest.fixture
def gpu_types(db: None) -> dict[str, Any]:
    from leaderboard.models import GpuType
    from leaderboard.sync import sync_gpu_types

    sync_gpu_types()
    return {gpu.key: gpu for gpu in GpuType.objects.all()}


@pytest.fixture
def problems(db: None) -> dict[str, Any]:
    from leaderboard.models import Problem
    from leaderboard.sync import sync_problems

    sync_problems()
    return {problem.name: problem for problem in Problem.objects.all()}


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A TCP server on the runner's loopback that records every connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def broker(tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A broker of this test's own (Celery prefers the environment variable to its settings)."""
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    monkeypatch.setenv("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)
    return settings.CELERY_BROKER_URL


@pytest.fixture(scope="module")
def user() -> Iterator[sandbox.JobUser | None]:
    """A job user of the runners' pool, claimed as a slot claims it: a runner started beside these
    tests (`make run`, another test) kills every process of the users it holds before each job."""
    if os.geteuid() != 0:
        yield None
        return
    name, lock = claim_job_user()
    try:
        yield sandbox.ensure_job_user(name)
    finally:
        lock.close()
