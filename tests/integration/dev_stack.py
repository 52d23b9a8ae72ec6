"""Helpers (no tests): ``solboard dev`` started in a private ``SOLBOARD_VAR`` as `make run` starts
it, waited for, read and stopped. Used by the tests that need the real local stack (web under
uvicorn, site worker, runner) rather than Django's test client."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
#: What a test's own environment may carry that would point the stack at someone else's services.
SERVICE_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "SOLBOARD_CACHE_URL")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class DevStack:
    process: subprocess.Popen[bytes]
    base: str
    var: Path
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Read the stack's SQLite database (embedded profile only)."""
        with sqlite3.connect(f"file:{self.var / 'db.sqlite3'}?mode=ro", uri=True, timeout=30) as db:
            return db.execute(sql, params).fetchall()


def start_dev(var: Path, *, runner: bool = True, env: dict[str, str] | None = None) -> DevStack:
    """`solboard dev` on ``var`` and a free port; embedded database and broker unless ``env`` names others."""
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if key not in SERVICE_VARIABLES}
    environment.update(SOLBOARD_VAR=str(var), PORT=str(port), SOLBOARD_DEV_RUNNER="true" if runner else "false",
                       SOLBOARD_RUNNER_SPARES="false", PYTHONPATH=str(REPO))
    environment.update(env or {})
    var.mkdir(parents=True, exist_ok=True)
    log = var.parent / f"{var.name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "leaderboard", "dev"], cwd=REPO, env=environment,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    return DevStack(process, f"http://127.0.0.1:{port}", var, log)


def wait_until_healthy(stack: DevStack, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not stack.alive():
            raise AssertionError(f"solboard dev exited with {stack.process.returncode}:\n{stack.log_tail()}")
        try:
            with urllib.request.urlopen(f"{stack.base}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"solboard dev did not answer /healthz within {timeout:.0f}s:\n{stack.log_tail()}")


def stop(stack: DevStack, timeout: float = STOP_TIMEOUT_S) -> int:
    """SIGTERM as Ctrl-C would; the supervisor's exit status (SIGKILL past the timeout)."""
    if stack.alive():
        stack.process.send_signal(signal.SIGTERM)
    try:
        return stack.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(stack.process.pid, signal.SIGKILL)
        stack.process.wait()
        raise AssertionError(f"solboard dev ignored SIGTERM for {timeout:.0f}s:\n{stack.log_tail()}") from None
