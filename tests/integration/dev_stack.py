"""Helpers (no tests): ``solboard dev`` started in a private ``SOLBOARD_VAR`` as `make run` starts
it, waited for, read and stopped. Used by the tests that need the real local stack (web under
uvicorn, site worker, runner) rather than Django's test client."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    env: dict[str, str]

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def manage(self, *args: str) -> str:
        """``solboard manage ...`` against the stack's database; its stdout."""
        done = subprocess.run([sys.executable, "-m", "leaderboard", "manage", *args], cwd=REPO, env=self.env,
                              capture_output=True, text=True, check=True, timeout=120)
        return done.stdout

    def token_for(self, username: str) -> str:
        return self.manage("create_api_token", username, "--create-user").strip().splitlines()[-1]

    def call(self, method: str, path: str, token: str, body: object = None,
             timeout: float = 120) -> tuple[int, float, dict[str, Any]]:
        """(status, seconds, JSON body) of one API request."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        return status, time.monotonic() - started, json.loads(raw or b"{}")

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Read the stack's SQLite database (embedded profile only)."""
        with sqlite3.connect(f"file:{self.var / 'db.sqlite3'}?mode=ro", uri=True, timeout=30) as db:
            return db.execute(sql, params).fetchall()


def start_dev(var: Path, *, runner: bool = True, env: dict[str, str] | None = None) -> DevStack:
    """`solboard dev` on ``var`` and a free port; embedded database and broker unless ``env`` names others."""
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if key not in SERVICE_VARIABLES}
    environment.update(
        SOLBOARD_VAR=str(var),
        PORT=str(port),
        SOLBOARD_DEV_RUNNER="true" if runner else "false",
        SOLBOARD_RUNNER_SPARES="false",
        PYTHONPATH=str(REPO),
    )
    environment.update(env or {})
    var.mkdir(parents=True, exist_ok=True)
    log = var.parent / f"{var.name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "leaderboard", "dev"], cwd=REPO, env=environment,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    return DevStack(process, f"http://127.0.0.1:{port}", var, log, environment)


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
        raise AssertionError(
            f"solboard dev ignored SIGTERM for {timeout:.0f}s:\n{stack.log_tail()}"
        ) from None
