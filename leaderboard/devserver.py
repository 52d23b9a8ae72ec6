"""``solboard dev``: everything `make run` needs on one machine, with no external service.

Prepares the database (migrate, sync_gpu_types, sync_problems) and the embedded broker's queues
(prepare_broker), then supervises three children:
the web server, one site worker (queue ``site``) and a runner node. Ctrl-C or SIGTERM stops them
all; if one of them dies, the others are stopped and the exit status is non-zero. Each child runs
in its own session so the supervisor decides the order and the grace period, and each gets
SIGTERM if the supervisor itself disappears (Linux parent-death signal).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from solboard_common.config import (
    broker_url,
    default_result_backend,
    env_bool,
    env_int,
    env_str,
    sqlite_path_of,
    var_dir,
)
from solboard_common.private_state import create_private_file, make_private_dir, tighten_var

GRACE_SECONDS = 20.0
POLL_SECONDS = 0.3
#: Files the supervisor, the web server and the site worker create are theirs alone (var/: database,
#: broker, results, keys). The runner keeps 022: as root it writes a job's inputs for the job user.
PRIVATE_UMASK, RUNNER_UMASK = 0o077, 0o022
# runner_credentials dev: the local runner signs its messages with a credential issued here (0600 in var/).
# prepare_broker last: the embedded broker's tables and queue rows exist before two children race to
# create them (its docstring says how that race ended `make run`).
PREPARE_STEPS = (
    ["migrate", "--noinput"],
    ["sync_gpu_types"],
    ["sync_problems"],
    ["runner_credentials", "dev"],
    ["prepare_broker"],
)


@dataclass
class Child:
    name: str
    argv: list[str]
    umask: int = PRIVATE_UMASK
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Stop:
    """Set by SIGINT/SIGTERM; the supervisor loop checks it."""

    requested = False
    signal_name = ""

    @classmethod
    def handle(cls, signum: int, frame: FrameType | None) -> None:
        cls.requested = True
        cls.signal_name = signal.Signals(signum).name


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="solboard dev", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=env_str("SOLBOARD_DEV_HOST", "127.0.0.1"),
                        help="web bind address (SOLBOARD_DEV_HOST)")
    parser.add_argument("--port", type=int, default=env_int("PORT", 8000, minimum=1), help="web port (PORT)")
    parser.add_argument("--device", default="auto", help="runner device: auto, cpu, or a GPU index")
    parser.add_argument("--no-runner", action="store_true", default=not env_bool("SOLBOARD_DEV_RUNNER", True),
                        help="start no runner node (SOLBOARD_DEV_RUNNER=0)")
    return parser.parse_args(argv)


def child_env() -> dict[str, str]:
    """One broker and one var dir for every child, resolved here once."""
    env = dict(os.environ)
    env["SOLBOARD_VAR"] = str(var_dir().resolve())
    env["CELERY_BROKER_URL"] = broker_url()
    # One page cache for the web server and the site worker: a result the worker stores makes the
    # web server's pages out of date at once (a per-process cache would keep them until they expire).
    env.setdefault("SOLBOARD_CACHE_URL", f"file://{Path(env['SOLBOARD_VAR']) / 'cache'}")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
    return env


def solboard(*args: str) -> list[str]:
    return [sys.executable, "-m", "leaderboard", *args]


def web_server(host: str, port: int) -> list[str]:
    """The ASGI app under uvicorn, as in production: API long-polls and event streams wait on the
    event loop instead of each holding a thread (docs/api.md). Open event streams are cut after a
    short grace period on SIGTERM; clients reconnect."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "leaderboard.asgi:application",
        "--host",
        host,
        "--port",
        str(port),
        "--timeout-graceful-shutdown",
        "5",
        "--no-access-log",
    ]


def children(args: argparse.Namespace) -> list[Child]:
    site_worker = [sys.executable, "-m", "celery", "-A", "leaderboard.celery", "worker", "-Q", "site",
                   "-n", "site@%h", "--pool", "prefork", "--concurrency", "1", "--without-gossip",
                   "--without-mingle", "--loglevel", "INFO"]
    procs = [
        Child("web", web_server(args.host, args.port)),
        Child("site-worker", site_worker),
    ]
    if args.no_runner:
        return procs
    if importlib.util.find_spec("runners.cli") is None:
        print(
            "solboard dev: no runner node in this tree (runners/cli.py); web and site worker only", flush=True
        )
        return procs
    procs.append(Child("runner", solboard("runner", "--device", args.device), umask=RUNNER_UMASK))
    return procs


def prepare_var(env: dict[str, str]) -> None:
    """var/ 0700 and its files 0600 before any child starts: the SQLite files are created 0600 now,
    and what an older checkout left readable to others is tightened (and said)."""
    var = Path(env["SOLBOARD_VAR"])
    make_private_dir(var)
    changed = tighten_var(var)
    if changed:
        print(
            f"solboard dev: {len(changed)} path(s) in {var} were readable by others; now private", flush=True
        )
    urls = (env.get("DATABASE_URL") or f"sqlite:///{var / 'db.sqlite3'}", env["CELERY_BROKER_URL"],
            env.get("CELERY_RESULT_BACKEND") or default_result_backend())
    for path in (sqlite_path_of(url) for url in urls):
        if path is not None:
            create_private_file(path)


def prepare(env: dict[str, str]) -> int:
    for step in PREPARE_STEPS:
        if Stop.requested:
            return 0
        print(f"solboard dev: manage {' '.join(step)}", flush=True)
        result = subprocess.run(solboard("manage", *step), env=env, check=False)
        if result.returncode != 0:
            print(f"solboard dev: `manage {step[0]}` failed ({result.returncode})", file=sys.stderr)
            return result.returncode
    return 0


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: PR_SET_PDEATHSIG = 1.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def start(child: Child, env: dict[str, str]) -> None:
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    # The supervisor is single-threaded, so preexec_fn is safe here.
    child.process = subprocess.Popen(
        child.argv, env=env, start_new_session=True, umask=child.umask, preexec_fn=preexec
    )
    print(f"solboard dev: started {child.name} (pid {child.process.pid})", flush=True)


def watch(procs: list[Child]) -> Child | None:
    """Wait until a stop is requested (None) or a child exits (that child)."""
    while not Stop.requested:
        for child in procs:
            if not child.running:
                return child
        time.sleep(POLL_SECONDS)
    return None


def stop_all(procs: list[Child], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM each child (it stops its own workers), wait, then SIGKILL what is left of its group."""
    for child in reversed(procs):
        if child.running and child.process is not None:
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in procs:
        if child.process is None:
            continue
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"solboard dev: {child.name} ignored SIGTERM for {grace:.0f}s; killing it", file=sys.stderr)
        _signal_group(child, signal.SIGKILL)  # leftovers of a child that exited (its own children)
        child.process.wait()


def _signal_group(child: Child, signum: int) -> None:
    if child.process is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, signum)


def supervise(procs: list[Child], env: dict[str, str]) -> int:
    for child in procs:
        start(child, env)
    dead = watch(procs)
    if dead is not None:
        code = dead.process.returncode if dead.process else None
        print(f"solboard dev: {dead.name} exited ({code}); stopping the others", file=sys.stderr)
    else:
        print(f"solboard dev: {Stop.signal_name} received; stopping", flush=True)
    stop_all(procs)
    return 0 if dead is None else _failure_code(dead)


def _failure_code(dead: Child) -> int:
    """A child that exits on its own is a failure, even with status 0."""
    code = dead.process.returncode if dead.process else None
    return code if code is not None and code > 0 else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(argv or []))
    signal.signal(signal.SIGINT, Stop.handle)
    signal.signal(signal.SIGTERM, Stop.handle)
    os.umask(PRIVATE_UMASK)
    env = child_env()
    prepare_var(env)
    code = prepare(env)
    if code != 0 or Stop.requested:
        return code
    print(f"solboard dev: http://{args.host}:{args.port}/  (broker {env['CELERY_BROKER_URL']})", flush=True)
    return supervise(children(args), env)
