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

from runners import identities, sandbox


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
def uid_rotation() -> Iterator[identities.Rotation | None]:
    """A block of job uids, claimed as a slot claims one: a runner started beside these tests
    (`make run`, another test) never hands out the same uids."""
    if os.geteuid() != 0:
        yield None
        return
    block, lock = identities.claim_block()
    try:
        yield identities.Rotation(block)
    finally:
        lock.close()


@pytest.fixture
def user(uid_rotation: identities.Rotation | None) -> sandbox.JobUser | None:
    """A fresh job uid, as the processes of a job that run submitted code get one: what a test
    runs directly in the jail stands for them (a judge, ``python -m evaluator``, gets the pair
    through ``execute.Context.users``)."""
    return uid_rotation.take().untrusted() if uid_rotation is not None else None
