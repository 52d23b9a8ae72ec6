"""The untrusted child as the judge sees it: a process, a channel, a log, and a watchdog.

The judge never blocks on anything the child can touch: the log is a regular file the judge
created and keeps open (read through that descriptor, never reopened by name, so a FIFO or a
symlink put in its place changes nothing), frames are read without blocking against a deadline,
and a watchdog thread kills the child's whole process group when the current stage's deadline
passes, whatever the judge's main thread is doing at that moment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.harness import channel, identity

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Environment variables the child inherits (nothing else: no broker URL, no tokens).
PASSED_ENV = (
    "PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "NVIDIA_VISIBLE_DEVICES",
    # Hosts that share NVLink must keep multicast off in every process (docs/harness.md).
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    # The folder of imported problems, so the child finds the problem the judge loaded (docs/importing.md).
    "SOLBOARD_IMPORTED_PROBLEMS",
)


class ChildTimeout(Exception):
    """The stage ran past its limit; the watchdog killed the process group."""


class ChildDied(Exception):
    """The channel closed: the child exited or was killed."""


class ProtocolViolation(Exception):
    """The child sent something the protocol does not allow at this point (class 4)."""


def child_env(scratch: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    python_path = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(
        HOME=str(scratch),
        TMPDIR=str(scratch),
        LANG="C.UTF-8",
        PYTHONPATH=os.pathsep.join(python_path),
        PYTHONDONTWRITEBYTECODE="1",
        TRITON_CACHE_DIR=str(scratch / "triton"),
        # @triton.autotune keeps what it chose in that cache (Triton's ``cache_results``), and
        # Inductor its compiled graphs and autotuning in its own: the witness process, which runs
        # with the same scratch folder after the timing child, then runs the configuration the child
        # tuned and timed instead of tuning again under the profiler (docs/security.md, "Autotuning").
        TRITON_CACHE_AUTOTUNING="1",
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor"),
        TORCH_EXTENSIONS_DIR=str(scratch / "torch_extensions"),
        # torch.compile compiles in-process: a pool of compile workers would outlive the calls.
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    return env


def open_log(path: Path) -> int:
    """A fresh regular file only the judge created (O_EXCL: nothing may exist there before)."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)


def read_log(descriptor: int, cap: int) -> str:
    """The child's output through the judge's own descriptor, capped: head and tail beyond ``cap``."""
    try:
        size = os.fstat(descriptor).st_size
        if size <= cap:
            data = os.pread(descriptor, size, 0)
        else:
            half = cap // 2
            data = (os.pread(descriptor, half, 0) + f"\n[... {size - cap} bytes cut ...]\n".encode()
                    + os.pread(descriptor, half, size - half))
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


@dataclass
class Stage:
    name: str
    limit_s: float
    shape: str | None = None
    #: Set when one call's own limit (``limit_call``), not the stage's, ran out: which call, and the
    #: rule its limit came from.
    call: str | None = None
    call_rule: str | None = None


class ChildProcess:
    """One untrusted child: spawn, talk, enforce the stage limits, and always clean up."""

    def __init__(self, argv: list[str], scratch: Path, log_cap: int,
                 env_overrides: dict[str, str] | None = None) -> None:
        self.argv, self.scratch, self.log_cap = argv, scratch, log_cap
        #: Variables the harness sets for this child over ``child_env`` (a multi-GPU rank's: multicast off).
        self.env_overrides = dict(env_overrides or {})
        self.stage = Stage("start_up", 0.0)
        self.deadline = float("inf")
        #: The call in progress and its deadline (``limit_call``), within the stage's.
        self.call: Stage | None = None
        self.call_deadline = float("inf")
        self.timed_out: Stage | None = None
        #: Set once a read failed: nothing more is asked of this child.
        self.broken = False
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._log = ""

    def spawn(self, start_limit_s: float) -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        self.log_fd = open_log(self.scratch / f"child-{os.getpid()}-{time.monotonic_ns()}.log")
        self.process = subprocess.Popen(
            [sys.executable, *self.argv, "--in-fd", str(to_child_r), "--out-fd", str(from_child_w)],
            cwd=self.scratch, env={**child_env(self.scratch), **self.env_overrides}, stdin=subprocess.DEVNULL,
            stdout=self.log_fd, stderr=subprocess.STDOUT, pass_fds=(to_child_r, from_child_w),
            start_new_session=True, **identity.untrusted_process(),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.reader = channel.FrameReader(self.from_child)
        self.enter("compile", start_limit_s)
        threading.Thread(target=self._watch, name="solboard-watchdog", daemon=True).start()

    def enter(self, stage: str, limit_s: float, shape: str | None = None) -> None:
        with self._lock:
            self.stage = Stage(stage, limit_s, shape)
            self.deadline = time.monotonic() + limit_s
            self.call, self.call_deadline = None, float("inf")

    def limit_call(self, what: str, limit_s: float, rule: str) -> None:
        """The call the child is making now must answer within ``limit_s`` (and the stage's limit)."""
        with self._lock:
            self.call = Stage(self.stage.name, limit_s, self.stage.shape, what, rule)
            self.call_deadline = time.monotonic() + limit_s

    def end_call(self) -> None:
        with self._lock:
            self.call, self.call_deadline = None, float("inf")

    def _current(self) -> tuple[float, Stage]:
        """The deadline that comes first, and what it belongs to."""
        with self._lock:
            if self.call is not None and self.call_deadline < self.deadline:
                return self.call_deadline, self.call
            return self.deadline, self.stage

    def _watch(self) -> None:
        while not self._stopped.wait(0.1):
            deadline, stage = self._current()
            late = time.monotonic() > deadline
            if late:
                self.timed_out = stage
                kill_group(self.process)
                return

    def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):  # the child died; the next read says so
            channel.write_all(self.to_child, channel.encode(message))

    def receive(self, *expected: str) -> dict[str, Any]:
        """The next message, which must be one of ``expected``; timeouts and deaths raise."""
        if self.broken:
            raise ChildDied("the channel already failed")
        self.broken = True
        deadline, stage = self._current()
        try:
            message = self.reader.next(deadline)
        except channel.ChannelTimeout:
            self.timed_out = self.timed_out or stage
            kill_group(self.process)
            raise ChildTimeout() from None
        except channel.ChannelError as error:
            if self.timed_out is not None:
                raise ChildTimeout() from None
            if self.reader.buffer and not self.reader.closed:
                raise ProtocolViolation(f"garbage on the channel ({error})") from None
            raise ChildDied(str(error)) from None
        if message["type"] not in expected:
            raise ProtocolViolation(f"unexpected {message['type']!r} message (expected {'/'.join(expected)})")
        self.broken = False
        return message

    def exit_description(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "did not exit"
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def close(self) -> str:
        """Kill the group, close the channel, return the log (capped). Idempotent."""
        if self._stopped.is_set():
            return self._log
        self._stopped.set()
        kill_group(self.process)
        for descriptor in (self.to_child, self.from_child):
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self._log = read_log(self.log_fd, self.log_cap)
        os.close(self.log_fd)
        return self._log
