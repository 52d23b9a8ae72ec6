"""Run one untrusted command in a sandbox and always clean up after it (classes 15, 19).

The child runs through ``runners/jail.py`` (see there for the processes and the order of the
privileged steps) in its own session and process group, with only the environment we give it, in
a fresh scratch folder that is its HOME, TMPDIR and cwd and that is deleted afterwards. What it
prints is captured and capped. A wall limit (and a cancel request) kills the whole process group;
afterwards every process of the job user is killed too, and every child of ours that died is
reaped (the worker that runs jobs is a subreaper: orphans of a killed jail come to it).

What this machine allows is probed once (:func:`capabilities`) to decide what to ask for; what
actually applied comes back from the jail on a pipe the job never holds, and only that is written
into ``Result.facts`` and ``Result.gaps``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from runners import cgroups, jailfacts, jobclean, judgewatch, procs
from runners.jobclean import cleanup

JAIL = Path(__file__).resolve().with_name("jail.py")
EXIT_JAIL_FAILED = 125
POLL_SECONDS = 0.1
#: The jail's facts are a few lines of JSON; more is not the jail.
FACTS_MAX_BYTES = 64 << 10


class SandboxError(RuntimeError):
    """The sandbox could not be set up (the job never ran)."""


@dataclass(frozen=True)
class Capabilities:
    root: bool
    user_namespace: bool  # not root: the namespaces below are created inside a user namespace
    namespaces: frozenset[str]  # of "net", "mount", "pid", "ipc"
    #: Why the job's seccomp filter cannot load here ("" when it can).
    seccomp_refused: str = "not probed"


@cache
def capabilities() -> Capabilities:
    """What the kernel lets us do, probed once per process in throwaway children."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(JAIL), "--probe"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if out.returncode != 0:
        return Capabilities(root=os.geteuid() == 0, user_namespace=False, namespaces=frozenset())
    data = json.loads(out.stdout)
    namespaces = frozenset(data["namespaces"])
    return Capabilities(bool(data["root"]), bool(data["user_namespace"]) and bool(namespaces), namespaces,
                        str(data.get("seccomp_refused", "not probed")))


@dataclass(frozen=True)
class JobUser:
    """Who a job runs as (``runners/identities.py`` hands out a fresh pair per job): the judge's
    uid, and with ``child_uid`` the uid of every process that runs submitted code (the judge then
    runs as (uid, child_uid, uid), out of their reach: ``runners/jail_ids.py``)."""

    name: str
    uid: int
    gid: int
    child_uid: int | None = None

    @property
    def uids(self) -> tuple[int, ...]:
        return (self.uid,) if self.child_uid is None else (self.uid, self.child_uid)

    @property
    def owner(self) -> int:
        """Who owns the job's files (the scratch folder): the untrusted processes' uid."""
        return self.uid if self.child_uid is None else self.child_uid

    def untrusted(self) -> JobUser:
        """The untrusted processes' identity alone: for a command that is not a judge (a probe,
        a test's stand-in for the child), which must not hold the judge's CAP_SETUID."""
        return JobUser(self.name, self.owner, self.gid)


@dataclass(frozen=True)
class Limits:
    wall_seconds: float
    cpu_seconds: int | None = None
    file_bytes: int | None = 256 << 20
    processes: int | None = 256
    address_space_bytes: int | None = None
    stdout_bytes: int = 64 << 10
    stderr_bytes: int = 64 << 10
    #: Each private tmpfs (/tmp, /var/tmp, /run); it is memory that RLIMIT_AS does not see.
    tmp_bytes: int = 256 << 20
    #: /dev/shm (the evaluator's CPU shared buffers) and the IPC namespace's SysV shared memory.
    shared_memory_bytes: int = 1 << 30
    #: The job's cgroup (all its processes together): host memory, and processes and threads.
    #: None: no group (the report says so).
    memory_bytes: int | None = None
    cgroup_processes: int | None = None


#: Isolation a Spec may switch off (tests, diagnosis); the report then says it did not apply.
NAMESPACES = ("net", "mount", "pid", "ipc")


@dataclass
class Spec:
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    stdin: bytes = b""
    user: JobUser | None = None
    disabled: frozenset[str] = frozenset()
    #: Folders the job must not see (the runner's state): an empty tmpfs over each, scratch bound back.
    hide: tuple[Path, ...] = ()
    cancel_requested: Callable[[], bool] = lambda: False
    on_start: Callable[[int], None] = lambda pid: None
    #: Asked about once a second while the job runs: why the job must end now for what it did
    #: itself (its GPU memory beyond its budget), or None. Ending it so is the job's failure.
    watch: Callable[[], str | None] = lambda: None
    #: The slot, for the name of the job's cgroup.
    slot: str = "slot"
    #: The niceness the job starts at (0: as the runner's). A warm spare stages at 19, so beside a
    #: running job it gets only the CPU time that job leaves; the runner sets it back before the
    #: spare warms up (``procs.renice``).
    nice: int = 0


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
    #: What the jail reported it did (JSON from jail.py, merged); empty when it never got that far.
    jail: dict[str, Any] = field(default_factory=dict)
    #: ``jail`` in words, for the report's ``sandbox`` field.
    facts: dict[str, str] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    #: Why the runner ended the job for what the job itself did (its judge stopped, its GPU
    #: memory past its budget): the submission's failure. None when it did not.
    ended_for: str | None = None
    #: Processes the OOM killer ended in the job's cgroup (its memory cap was hit).
    oom_kills: int = 0

    @property
    def jail_failed(self) -> bool:
        """The job never started: the jail says so (a job cannot write on the jail's pipe)."""
        return not self.jail.get("started", False)


#: The job's scratch folder (``runners/jobclean.py``), here for the callers that start jobs.
Scratch = jobclean.Scratch


def jail_config(spec: Spec, scratch: Path, facts_fd: int) -> dict[str, object]:
    caps = capabilities()
    # SOLBOARD_SECCOMP=0: a diagnosis switch (is a failure the filter's?); the report says so.
    off = "seccomp" in spec.disabled or os.environ.get("SOLBOARD_SECCOMP", "1").lower() in (
        "0",
        "false",
        "no",
    )
    limits = spec.limits
    namespaces = [name for name in NAMESPACES if name in caps.namespaces and name not in spec.disabled]
    return {
        "namespaces": namespaces,
        "user_namespace": caps.user_namespace and bool(namespaces),
        "scratch": str(scratch),
        "hide": [str(folder) for folder in hidden_folders(spec, scratch)],
        # Bound back read-only when a private /tmp (or /run, /dev/shm) would hide them: a checkout
        # and its virtualenv under /tmp (CI's clean clone) must still run.
        "keep": [str(path) for path in needed_paths(spec) if path.is_dir()],
        "tmpfs_bytes": limits.tmp_bytes,
        "shm_bytes": limits.shared_memory_bytes,
        "facts_fd": facts_fd,
        "cpu_seconds": limits.cpu_seconds,
        "file_bytes": limits.file_bytes,
        # RLIMIT_NPROC counts every process of the real uid: only meaningful for a dedicated user.
        "processes": limits.processes if spec.user is not None else None,
        "address_space_bytes": limits.address_space_bytes,
        "uid": spec.user.uid if spec.user else None,
        "gid": spec.user.gid if spec.user else None,
        "child_uid": spec.user.child_uid if spec.user else None,
        "nice": spec.nice,
        "seccomp": not caps.seccomp_refused and not off,
        "seccomp_refused": caps.seccomp_refused or ("switched off" if off else ""),
    }


def needed_paths(spec: Spec) -> list[Path]:
    """What the job must run: the interpreter, its prefixes, the PYTHONPATH (the project)."""
    needed = [Path(sys.executable).resolve(), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    needed += [Path(entry).resolve() for entry in spec.env.get("PYTHONPATH", "").split(":") if entry]
    return list(dict.fromkeys(needed))


def hidden_folders(spec: Spec, scratch: Path) -> list[Path]:
    """The scratch root (other jobs' folders) and the Spec's folders, but never one that holds
    what the job must run (``needed_paths``)."""
    needed = needed_paths(spec)
    folders = [scratch.resolve().parent, *(Path(folder).resolve() for folder in spec.hide)]
    return [folder for folder in dict.fromkeys(folders)
            if not any(path == folder or folder in path.parents for path in needed)]


class _CappedReader(threading.Thread):
    """Drains a pipe to the end (so the child never blocks) but keeps at most ``cap`` bytes."""

    def __init__(self, stream: object, cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.data = bytearray()
        self.truncated = False

    def run(self) -> None:
        # read1: what is there now (a spare's ready line must not wait for 64 KiB more or the end)
        read = self.stream.read1  # type: ignore[attr-defined]
        while chunk := read(65536):
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.data += chunk[:room]


def run(spec: Spec, scratch: Path) -> Result:
    """Run ``spec.argv`` jailed in ``scratch``; never leaves a process of the job behind."""
    running = start(spec, scratch)
    running.write_stdin(spec.stdin)
    return running.wait(running.started + spec.limits.wall_seconds, spec.cancel_requested)


def start(spec: Spec, scratch: Path) -> Running:
    """Start ``spec.argv`` jailed in ``scratch`` and drain its output; its stdin stays open until
    ``Running.write_stdin`` (a warm spare reads its job there, long after it started)."""
    facts_read, facts_write = os.pipe()
    config = jail_config(spec, scratch, facts_write)
    group, group_problem = _job_group(spec)
    config["cgroup_procs"] = group.procs_files if group else []
    config["cgroup_problem"] = group_problem
    argv = [sys.executable, "-I", "-S", str(JAIL), json.dumps(config), "--", *spec.argv]
    started = time.monotonic()
    try:
        child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=scratch, env=spec.env, start_new_session=True, close_fds=True, pass_fds=(facts_write,),
        )
    except OSError as error:
        os.close(facts_read)
        if group is not None:
            group.remove()
        raise SandboxError(f"cannot start the sandboxed process: {error}") from error
    finally:
        os.close(facts_write)
    spec.on_start(child.pid)
    running = Running(spec, config, child, started, _CappedReader(child.stdout, spec.limits.stdout_bytes),
                      _CappedReader(child.stderr, spec.limits.stderr_bytes),
                      _CappedReader(os.fdopen(facts_read, "rb"), FACTS_MAX_BYTES), group=group)
    for reader in running.readers:
        reader.start()
    return running


def _job_group(spec: Spec) -> tuple[cgroups.JobGroup | None, str]:
    """The job's cgroup, or None and why not."""
    limits = spec.limits
    if limits.memory_bytes is None or "cgroup" in spec.disabled:
        return None, "not asked for"
    try:
        return cgroups.create(spec.slot, limits.memory_bytes, limits.cgroup_processes or 4096), ""
    except cgroups.CgroupUnavailable as error:
        return None, str(error)


@dataclass
class Running:
    """A sandboxed command that started: its output drained as it comes, its end not yet seen."""

    spec: Spec
    config: dict[str, object]
    child: subprocess.Popen[bytes]
    started: float
    stdout: _CappedReader
    stderr: _CappedReader
    facts: _CappedReader
    group: cgroups.JobGroup | None = None
    #: How much of stdout ``new_lines`` has handed out (complete lines only).
    _read_to: int = 0
    #: Why the runner ended it for what it did itself (see ``Result.ended_for``).
    ended_for: str | None = None

    @property
    def readers(self) -> tuple[_CappedReader, ...]:
        return (self.stdout, self.stderr, self.facts)

    @property
    def pid(self) -> int:
        """The jail's outer process: its process group is the job's."""
        return self.child.pid

    def alive(self) -> bool:
        return self.child.poll() is None

    def new_lines(self) -> list[bytes]:
        """Complete stdout lines not handed out before (a line still being written waits)."""
        data = bytes(self.stdout.data)
        end = data.rfind(b"\n") + 1
        if end <= self._read_to:
            return []
        lines = data[self._read_to:end].split(b"\n")[:-1]
        self._read_to = end
        return lines

    def write_stdin(self, data: bytes, close: bool = True) -> None:
        """Give the command its input and close its stdin (once); ``close`` false keeps it open for
        more (a warm spare reads the word to warm up first, its job later)."""
        _feed_stdin(self.child, data, close)

    def wait(self, deadline: float, cancel_requested: Callable[[], bool],
             on_line: Callable[[bytes], None] | None = None) -> Result:
        """Wait for the end, killing the process group at ``deadline`` (time.monotonic) or on
        cancel; ``on_line`` gets each new stdout line while it runs, and those that came with its
        exit (a judge leaves right after its last lines: evaluator/jobstream.py). Then clean up
        everything."""
        timed_out, cancelled = _wait(self, deadline, cancel_requested, on_line)
        result = self._finish(timed_out, cancelled)
        if on_line is not None:  # the readers are joined: every line the process wrote is here
            for line in self.new_lines():
                on_line(line)
        return result

    def kill(self) -> Result:
        """End it now (a spare nobody will use) and clean up as after any job."""
        procs.kill_group(self.child.pid)
        _feed_stdin(self.child, b"")
        self.child.wait()
        return self._finish(False, True)

    def _finish(self, timed_out: bool, cancelled: bool) -> Result:
        self.facts.join(timeout=5)
        jail = jailfacts.parse(bytes(self.facts.data))
        if not self.facts.is_alive():
            self.facts.stream.close()  # type: ignore[attr-defined]
        spec = self.spec
        leftovers = cleanup(
            self.child.pid, spec.user, spec.env.get(procs.MARKER_VARIABLE), jail.get("init_pid")
        )
        for reader in (self.stdout, self.stderr):
            reader.join(timeout=5)
        oom_kills = self.group.oom_kills() if self.group else 0
        if self.group is not None:
            self.group.remove()
        jail["cgroup_text"] = self.group.describe() if self.group and jail.get("cgroup") else ""
        return Result(
            returncode=_exit_code(jail, self.child), stdout=bytes(self.stdout.data),
            stderr=bytes(self.stderr.data), stdout_truncated=self.stdout.truncated,
            stderr_truncated=self.stderr.truncated, timed_out=timed_out, cancelled=cancelled,
            wall_seconds=time.monotonic() - self.started,
            leftovers_killed=leftovers + int(jail.get("leftovers_killed", 0)), jail=jail,
            facts=jailfacts.describe(jail, self.config, spec.user.name if spec.user else None),
            gaps=jailfacts.gaps(jail, self.config, spec.user is not None),
            ended_for=self.ended_for, oom_kills=oom_kills,
        )


def _exit_code(jail: dict[str, Any], child: subprocess.Popen[bytes]) -> int:
    """The job's own exit status as its init saw it; the jail's when the job never ran or init
    was killed (a signal then reads as a negative number, as Popen has it)."""
    code = jail.get("job_exit")
    if isinstance(code, int):
        return code
    return child.returncode if child.returncode is not None else -signal.SIGKILL


def _feed_stdin(child: subprocess.Popen[bytes], data: bytes, close: bool = True) -> None:
    if child.stdin is None or child.stdin.closed:
        return
    try:
        child.stdin.write(data)
        if close:
            child.stdin.close()
        else:
            child.stdin.flush()
    except (BrokenPipeError, OSError):
        pass  # the child exited (or closed stdin) before reading: its exit status says why


def _wait(running: Running, deadline: float, cancel_requested: Callable[[], bool],
          on_line: Callable[[bytes], None] | None) -> tuple[bool, bool]:
    """Wait for the child; kill its group at the deadline, on cancel, or when the runner's watch
    says the job must end for what it did (``running.ended_for``). (timed_out, cancelled)"""
    child = running.child
    watch = judgewatch.JudgeWatch(lambda: jailfacts.parse(bytes(running.facts.data)), running.spec.watch)
    while True:
        try:
            child.wait(timeout=POLL_SECONDS)
            return False, False
        except subprocess.TimeoutExpired:
            pass
        if on_line is not None:
            for line in running.new_lines():
                on_line(line)
        timed_out = time.monotonic() >= deadline
        cancelled = not timed_out and cancel_requested()
        running.ended_for = None if timed_out or cancelled else watch.check()
        if timed_out or cancelled or running.ended_for:
            procs.kill_group(child.pid)
            child.wait()
            return timed_out, cancelled


@cache
def become_subreaper() -> None:
    """Orphans of a job whose jail was killed come to this process (not to the host's init), so
    :func:`cleanup` can kill and reap them. Call it only in a process that runs jobs, not in the
    supervisor, whose own children (the workers) it would otherwise inherit."""
    procs.set_child_subreaper()


def signal_name(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"
