"""A live ``make run`` (``solboard dev``: uvicorn, the site worker, a CPU runner, SQLite and the
embedded broker in a folder of its own) for tests that drive it as a person or a program would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOLBOARD = [sys.executable, "-m", "leaderboard"]
START_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_healthy(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()[-4000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError("make run did not become healthy:\n" + log.read_text()[-4000:])


@contextmanager
def live_site(var: Path, **extra_env: str) -> Iterator[dict[str, str]]:
    """Start `solboard dev` in ``var`` on a free port; yield its environment (SOLBOARD_SERVER,
    SOLBOARD_VAR, PORT...); stop the whole process group afterwards."""
    var.chmod(0o755)  # the runner's sandboxed jobs run as an unprivileged user under it
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "SOLBOARD_CACHE_URL")}
    # The page cache make run uses (a folder), named here too so `manage` commands share it.
    env.update(SOLBOARD_VAR=str(var), PORT=str(port), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
               SOLBOARD_CACHE_URL=f"file://{var / 'cache'}", **extra_env)
    log = var / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*SOLBOARD, "dev"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_healthy(port, process, log)
        yield {**env, "SOLBOARD_SERVER": f"http://127.0.0.1:{port}"}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run([*SOLBOARD, "manage", *args], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()
