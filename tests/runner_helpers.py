"""Helpers (no tests) for tests that start real runner nodes and real brokers.

- ``isolated_broker``: the embedded SQLite broker in a temporary folder, or, when
  CELERY_BROKER_URL names Redis, a dedicated Redis database with our queues purged.
- ``SiteQueue``: reads what runners send to the ``site`` queue, as a site worker would receive it.
- ``RunnerProcess``: ``python -m runners`` as a subprocess, always stopped (and killed) at the end,
  signing with a credential of its own (``local_credential`` when no site issued one), read from a
  0600 file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kombu import Connection

from evaluator.problems import get_problem
from runners import procs
from runners.celery_app import build_app
from solboard_common.protocol import RUNNER_TASK, SITE_QUEUE, Job, JobLimits, gpu_queue
from solboard_common.signing import Credential, write_private_file

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_VECTOR_ADD = (REPO / "examples" / "python" / "vector_add.py").read_text()
HANGING_KERNEL = "import time\n\ndef kernel(a, b, c):\n    time.sleep(600)\n"


def traversable_folder() -> Path:
    """A folder the job user can reach (pytest's tmp_path sits under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="solboard-test-", dir="/tmp"))
    os.chmod(folder, 0o755)
    return folder


@contextmanager
def broker_environment(url: str) -> Iterator[None]:
    """Celery prefers CELERY_BROKER_URL to the broker an app is configured with: point it at the
    test's broker while the test uses it."""
    saved = os.environ.get("CELERY_BROKER_URL")
    os.environ["CELERY_BROKER_URL"] = url
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = saved


def isolated_broker(folder: Path, redis_db: int) -> str:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if url.startswith(("redis://", "rediss://")):
        base = url.rsplit("/", 1)[0] if url.count("/") > 2 else url
        isolated = f"{base}/{redis_db}"
        with Connection(isolated) as connection:
            connection.default_channel.client.flushdb()  # a database reserved for these tests
        return isolated
    return f"sqla+sqlite:///{folder / 'broker.sqlite3'}"


def make_job(evaluation_id: int, source: str = EXAMPLE_VECTOR_ADD, mode: str = "test",
             limits: JobLimits | None = None, job_id: str | None = None, problem: str = "vector_add",
             gpu_count: int = 1) -> Job:
    return Job(
        job_id=job_id or f"job-{evaluation_id}-{os.urandom(3).hex()}",
        evaluation_id=evaluation_id,
        problem=problem,
        problem_version=get_problem(problem).version,
        language="python",
        source=source,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        mode=mode,  # type: ignore[arg-type]
        seed=1234567,
        gpu_type="cpu",
        gpu_count=gpu_count,
        limits=limits or JobLimits(),
    )


@dataclass
class SiteQueue:
    """Drains the site queue; ``wait_for`` returns the first message that matches."""

    broker: str
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with Connection(self.broker) as connection:
            queue = connection.SimpleQueue(SITE_QUEUE)
            while time.monotonic() < deadline:
                try:
                    message = queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                self.seen.append((message.headers["task"], message.payload[0][0]))
                message.ack()
            queue.close()

    def wait_for(self, predicate: Callable[[str, dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for task, payload in self.seen:
                if predicate(task, payload):
                    return payload
            if time.monotonic() > deadline:
                names = [
                    (task, payload.get("job_id")) for task, payload in self.seen if "heartbeat" not in task
                ]
                raise AssertionError(f"no matching message within {timeout}s; seen {names}")
            self.drain(1.0)

    def result_of(self, job_id: str, timeout: float = 90) -> dict[str, Any]:
        return self.wait_for(lambda t, p: t == "leaderboard.store_result" and p["job_id"] == job_id, timeout)

    def count(self, task: str, job_id: str) -> int:
        return sum(1 for name, payload in self.seen if name == task and payload.get("job_id") == job_id)


def send_job(broker: str, job: Job) -> None:
    app = build_app(broker)
    app.send_task(
        RUNNER_TASK, args=[job.model_dump(mode="json")], queue=gpu_queue(job.gpu_type, job.gpu_count)
    )


def local_credential(node: str) -> Credential:
    """A credential no site issued: for tests that play the site themselves (no database)."""
    return Credential(node=node, public_id=f"rctest{secrets.token_hex(4)}", key=secrets.token_bytes(32))


class RunnerProcess:
    """A CPU runner node in a subprocess, with its own state folder, log and credential file."""

    def __init__(self, name: str, broker: str, var: Path, extra_env: dict[str, str] | None = None,
                 credential: Credential | None = None) -> None:
        self.name, self.var = name, var
        self.credential = credential or local_credential(name)
        self.credential_file = var / f"credential-{name}"
        write_private_file(self.credential_file, self.credential.secret_string())
        self.log = var / f"runner-{name}.log"
        self.env = {**os.environ, "SOLBOARD_VAR": str(var), "CELERY_BROKER_URL": broker,
                    "SOLBOARD_HEARTBEAT_SECONDS": "1", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def state(self) -> Path:
        return self.var / "runner" / self.name

    def start(self) -> RunnerProcess:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "runners", "--device", "cpu", "--name", self.name,
                 "--credential-file", str(self.credential_file), "--loglevel", "INFO"],
                cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_the_test)  # one prctl call, no locks taken
        return self

    def tree(self) -> list[int]:
        """The supervisor, its workers and their jobs (the workers and jobs run in own sessions)."""
        if self.process is None:
            return []
        found, frontier = [], [self.process.pid]
        while frontier:
            pid = frontier.pop()
            found.append(pid)
            frontier += [child for child in _children(pid)]
        return [pid for pid in found if procs.alive(pid)]

    def kill_hard(self) -> None:
        """kill -9 the whole node at once: supervisor, workers, jobs."""
        for pid in self.tree():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 60) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=timeout)
        self.kill_hard()  # whatever is left (nothing, when the stop was clean)
        return self.process.returncode

    def log_tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""


def _die_with_the_test() -> None:
    """A node must not outlive a test run that was killed before its finalisers ran."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(item) for item in text.split()]


def messages_on(broker: str, queue: str) -> list[dict[str, Any]]:
    """Take every message waiting on a queue (acknowledged) and return their first arguments."""
    found = []
    with Connection(broker) as connection:
        simple = connection.SimpleQueue(queue)
        while True:
            try:
                message = simple.get(timeout=0.2)
            except simple.Empty:
                break
            found.append(message.payload[0][0])
            message.ack()
        simple.close()
    return found
