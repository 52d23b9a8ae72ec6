"""Run one untrusted command in a sandbox and always clean up after it (EXPLOITS.md class 15).

The child runs through ``runners/jail.py`` (see there for the order of the privileged steps) in
its own session and process group, with only the environment we give it, in a fresh scratch
folder that is its HOME, TMPDIR and cwd and that is deleted afterwards. What it prints is captured
and capped. A wall limit (and a cancel request) kills the whole process group; afterwards every
process of the job user is killed too, which reaches processes that called ``setsid``.

What this machine allows is probed once (:func:`capabilities`) and written into
``SandboxResult.facts`` so the report says which isolation applied and which did not.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Self

from runners import procs

JAIL = Path(__file__).resolve().with_name("jail.py")
EXIT_JAIL_FAILED = 125
POLL_SECONDS = 0.1


class SandboxError(RuntimeError):
    """The sandbox could not be set up (the job never ran)."""


@dataclass(frozen=True)
class Capabilities:
    root: bool
    network_namespace: bool
    mount_namespace: bool


@cache
def capabilities() -> Capabilities:
    """What the kernel lets us do, probed once per process in a throwaway child."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(JAIL), "--probe"], check=False, capture_output=True, text=True, timeout=30
    )
    if out.returncode != 0:
        return Capabilities(root=os.geteuid() == 0, network_namespace=False, mount_namespace=False)
    data = json.loads(out.stdout)
    return Capabilities(bool(data["root"]), bool(data["network_namespace"]), bool(data["mount_namespace"]))


@dataclass(frozen=True)
class JobUser:
    name: str
    uid: int
    gid: int


def ensure_job_user(name: str) -> JobUser | None:
    """The unprivileged user jobs run as; created when missing. None when we are not root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        created = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
            check=False,
            capture_output=True,
            text=True,
        )
        if created.returncode not in (0, 9):  # 9: created meanwhile by another slot
            raise SandboxError(f"useradd {name} failed: {created.stderr.strip()}") from None
        entry = pwd.getpwnam(name)
    return JobUser(name, entry.pw_uid, entry.pw_gid)


@dataclass(frozen=True)
class Limits:
    wall_seconds: float
    cpu_seconds: int | None = None
    file_bytes: int | None = 256 << 20
    processes: int | None = 256
    address_space_bytes: int | None = None
    stdout_bytes: int = 64 << 10
    stderr_bytes: int = 64 << 10


@dataclass
class Spec:
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    stdin: bytes = b""
    user: JobUser | None = None
    isolate_network: bool = True
    cancel_requested: Callable[[], bool] = lambda: False
    on_start: Callable[[int], None] = lambda pid: None


@dataclass
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    cancelled: bool
    wall_seconds: float
    leftovers_killed: int
    facts: dict[str, str] = field(default_factory=dict)

    @property
    def jail_failed(self) -> bool:
        return self.returncode == EXIT_JAIL_FAILED and b"solboard-jail:" in self.stderr


class Scratch:
    """A fresh folder owned by the job user, removed on exit (whatever the job left in it)."""

    def __init__(self, root: Path, user: JobUser | None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)  # traversable, not listable: jobs cannot see each other's folders
        self.path = Path(tempfile.mkdtemp(prefix="job-", dir=root))
        (self.path / "tmp").mkdir()
        if user is not None:
            for folder in (self.path, self.path / "tmp"):
                os.chown(folder, user.uid, user.gid)
        os.chmod(self.path, 0o700)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, onerror=_force_remove)


def _force_remove(function: Callable[..., object], path: str, exc_info: object) -> None:
    # A job can leave read-only folders behind; when not root, make them writable and retry.
    parent = os.path.dirname(path)
    for target in (parent, path):
        try:
            os.chmod(target, 0o700)
        except OSError:
            pass
    try:
        function(path)
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def jail_config(spec: Spec, scratch: Path) -> dict[str, object]:
    caps = capabilities()
    limits = spec.limits
    return {
        "network_namespace": spec.isolate_network and caps.network_namespace,
        "mount_namespace": caps.mount_namespace and spec.user is not None,
        "scratch": str(scratch),
        "cpu_seconds": limits.cpu_seconds,
        "file_bytes": limits.file_bytes,
        # RLIMIT_NPROC counts every process of the real uid: only meaningful for a dedicated user.
        "processes": limits.processes if spec.user is not None else None,
        "address_space_bytes": limits.address_space_bytes,
        "uid": spec.user.uid if spec.user else None,
        "gid": spec.user.gid if spec.user else None,
    }


def describe(config: dict[str, object], spec: Spec) -> dict[str, str]:
    caps = capabilities()
    network = "namespace (loopback only)" if config["network_namespace"] else (
        "NOT isolated: this kernel refused a network namespace" if spec.isolate_network else "not requested"
    )
    return {
        "user": spec.user.name if spec.user else "NOT dropped: the runner is not root",
        "network": network,
        "tmp": "private tmpfs for /tmp, /var/tmp, /dev/shm" if config["mount_namespace"] else (
            "shared (no mount namespace)" if caps.root else "shared (not root)"
        ),
        "rlimits": ", ".join(
            f"{name}={config[name]}"
            for name in ("cpu_seconds", "file_bytes", "processes", "address_space_bytes")
            if config[name] is not None
        ) + ", core=0",
        "address_space": "limited" if config["address_space_bytes"] else "unlimited (CUDA needs it)",
        "session": "own session and process group; killed with its group and its user",
        "environment": "empty but PATH, HOME, TMPDIR, LANG, CUDA_VISIBLE_DEVICES, PYTHONPATH",
    }


class _CappedReader(threading.Thread):
    """Drains a pipe to the end (so the child never blocks) but keeps at most ``cap`` bytes."""

    def __init__(self, stream: object, cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.data = bytearray()
        self.truncated = False

    def run(self) -> None:
        read = self.stream.read  # type: ignore[attr-defined]
        while chunk := read(65536):
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.data += chunk[:room]


def run(spec: Spec, scratch: Path) -> Result:
    """Run ``spec.argv`` jailed in ``scratch``; never leaves a process of the job behind."""
    config = jail_config(spec, scratch)
    argv = [sys.executable, "-I", "-S", str(JAIL), json.dumps(config), "--", *spec.argv]
    started = time.monotonic()
    try:
        child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=scratch, env=spec.env, start_new_session=True, close_fds=True,
        )
    except OSError as error:
        raise SandboxError(f"cannot start the sandboxed process: {error}") from error
    spec.on_start(child.pid)
    readers = [_CappedReader(child.stdout, spec.limits.stdout_bytes),
               _CappedReader(child.stderr, spec.limits.stderr_bytes)]
    for reader in readers:
        reader.start()
    _feed_stdin(child, spec.stdin)
    timed_out, cancelled = _wait(child, spec, started)
    leftovers = cleanup(child.pid, spec.user, spec.env.get(procs.MARKER_VARIABLE))
    for reader in readers:
        reader.join(timeout=5)
    return Result(
        returncode=child.returncode, stdout=bytes(readers[0].data), stderr=bytes(readers[1].data),
        stdout_truncated=readers[0].truncated, stderr_truncated=readers[1].truncated,
        timed_out=timed_out, cancelled=cancelled, wall_seconds=time.monotonic() - started,
        leftovers_killed=leftovers, facts=describe(config, spec),
    )


def _feed_stdin(child: subprocess.Popen[bytes], data: bytes) -> None:
    assert child.stdin is not None
    try:
        child.stdin.write(data)
        child.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child exited (or closed stdin) before reading: its exit status says why


def _wait(child: subprocess.Popen[bytes], spec: Spec, started: float) -> tuple[bool, bool]:
    """Wait for the child; kill its group at the wall limit or on cancel. (timed_out, cancelled)"""
    deadline = started + spec.limits.wall_seconds
    while True:
        try:
            child.wait(timeout=POLL_SECONDS)
            return False, False
        except subprocess.TimeoutExpired:
            pass
        timed_out = time.monotonic() >= deadline
        cancelled = not timed_out and spec.cancel_requested()
        if timed_out or cancelled:
            procs.kill_group(child.pid)
            child.wait()
            return timed_out, cancelled


def cleanup(pgid: int, user: JobUser | None, marker: str | None) -> int:
    """Kill the job's process group, every process of its user, and (not root) every process
    that still carries the job's marker variable. Returns how many survivors were killed."""
    survivors = procs.kill_group(pgid)
    if user is not None:
        survivors += kill_user(user)
    if marker:
        survivors += procs.kill_marked(marker)
    return survivors


def kill_user(user: JobUser, rounds: int = 5) -> int:
    killed = 0
    for _ in range(rounds):
        pids = procs.pids_of_uid(user.uid)
        if not pids:
            break
        killed = max(killed, len(pids))
        subprocess.run([sys.executable, "-I", "-S", str(JAIL), "--kill-uid", str(user.uid)], check=False, timeout=30)
        time.sleep(0.05)
    return killed


def signal_name(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"
