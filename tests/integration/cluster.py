"""A site worker and CPU runner nodes as real processes around a database and a broker of their own,
for integration tests that follow a submission end to end (``running_cluster``).

The site worker and the runners are subprocesses, so the database must be one they can open: a
SQLite file created for the cluster (or, when DATABASE_URL names PostgreSQL, a fresh database on
that server), migrated and synced here; the broker is a temporary embedded one (or a Redis
database of the caller's own when CELERY_BROKER_URL names Redis).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.db import connections
from django.test import override_settings

from leaderboard.dispatch import credentials
from leaderboard.models import Evaluation
from solboard_common.protocol import SITE_QUEUE
from tests.runner_helpers import RunnerProcess, isolated_broker, traversable_folder

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Cluster:
    folder: Path
    broker: str
    env: dict[str, str]
    runners: list[RunnerProcess]

    def runner(self, name: str) -> RunnerProcess:
        _, credential = credentials.issue(name, created_by="test")  # the site knows its key
        runner = RunnerProcess(name, self.broker, self.folder, self.env, credential=credential).start()
        self.runners.append(runner)
        return runner


def dedicated_database(folder: Path) -> tuple[dict[str, Any], str, Callable[[], None]]:
    """Settings for a database both this process and the subprocesses can open."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        path = folder / "db.sqlite3"
        return {"NAME": str(path)}, f"sqlite:///{path}", lambda: None
    name = f"solboard_dispatch_{os.getpid()}"
    with connections["default"]._nodb_cursor() as cursor:  # the server's maintenance database
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with connections["default"]._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')

    return {"NAME": name}, url.rsplit("/", 1)[0] + f"/{name}", drop


def start_site_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "celery", "-A", "leaderboard.celery", "worker", "-Q", SITE_QUEUE,
            "-n", f"site@it{os.getpid()}", "--pool", "solo", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel", "INFO"]
    with log.open("ab") as out:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


@contextmanager
def running_cluster(django_db_blocker: Any, env_vars: dict[str, str], settings: dict[str, Any],
                    redis_db: int) -> Iterator[Cluster]:
    """The cluster, its environment ``env_vars`` (seen by its processes and this one) and, for this
    process, ``settings`` (the same values: settings were read before the variables were set)."""
    folder = traversable_folder()
    broker = isolated_broker(folder, redis_db=redis_db)
    original = connections["default"]
    saved_env = {key: os.environ.get(key) for key in [*env_vars, "CELERY_BROKER_URL"]}
    os.environ.update({**env_vars, "CELERY_BROKER_URL": broker})  # Celery prefers it to its settings
    with django_db_blocker.unblock():
        overrides, url, drop = dedicated_database(folder)
        # A connection of its own: pytest-django's SQLite test database lives in memory, and
        # closing that connection would destroy it for the modules that run after this one.
        connection = type(original)({**original.settings_dict, **overrides}, alias="default")
        connections["default"] = connection
        call_command("migrate", verbosity=0)
        call_command("sync_gpu_types", verbosity=0)
        call_command("sync_problems", verbosity=0)
        env = {
            **os.environ,
            **env_vars,
            "DATABASE_URL": url,
            "CELERY_BROKER_URL": broker,
            "SOLBOARD_VAR": str(folder),
            "PYTHONUNBUFFERED": "1",
        }
        site = start_site_worker(env, folder / "site-worker.log")
        cluster = Cluster(folder, broker, env, [])
        try:
            with override_settings(CELERY_BROKER_URL=broker, **settings):
                yield cluster
        finally:
            for runner in cluster.runners:
                runner.stop()
            site.send_signal(signal.SIGTERM)
            try:
                site.wait(timeout=30)
            except subprocess.TimeoutExpired:
                site.kill()
            for log in sorted(folder.glob("*.log")):
                print(f"---- {log.name}\n{log.read_text(errors='replace')[-4000:]}")
            connection.close()
            connections["default"] = original
            drop()
            for key, value in saved_env.items():
                os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
            shutil.rmtree(folder, ignore_errors=True)


def wait_for(
    evaluation: Evaluation, condition: Callable[[Evaluation], bool], timeout: float = 90
) -> Evaluation:
    deadline = time.monotonic() + timeout
    while True:
        evaluation.refresh_from_db()
        if condition(evaluation):
            return evaluation
        if time.monotonic() > deadline:
            raise AssertionError(
                f"evaluation {evaluation.pk} stuck in {evaluation.status}: {evaluation.message}"
            )
        time.sleep(0.3)
