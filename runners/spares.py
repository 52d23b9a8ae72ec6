"""Warm spares: each runner slot keeps the evaluator process of its *next* job started and warm.

A job's evaluator spends seconds before it can judge anything: Python and torch imports, the CUDA
context, the warm-up of the trusted paths, the child's own start (7.7-11.8 s on the H200). A slot
that is idle starts ``python -m evaluator serve-spare`` in the same jail as a job (fresh scratch
folder, the slot's job user, every limit a job gets), which does all of that and then waits for
one job on its stdin (``evaluator/harness/warm.py``). The worker hands it the next job it takes
(``execute.run``): the job's files into the spare's scratch folder, one line (run's arguments and
the secret seed) on its stdin.

Rules (docs/runners.md, docs/security.md "Warm spares"):

- A spare serves exactly one job and then is gone with its scratch folder; one that is not used is
  killed, never handed to a later job. It knows nothing of its job before it gets it.
- It warms up only while no job runs on its GPUs: it holds the slot's GPU locks (taken without
  waiting) until it says ready, and a slot busy with a job starts none. A job on GPUs shared with
  another slot stops that slot's spare before it checks that its GPUs are free.
- It is replaced when it died, printed anything but one ``ready`` line, said ``not_ready``, or is
  older than ``SPARE_MAX_AGE_S``. A job that finds no ready spare runs in a fresh process, as before.
- Spares whose warm-up keeps failing are retried with a growing pause (``FAILURE_BACKOFF_S``).
"""

from __future__ import annotations

import logging
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import jobstream
from runners import execute, procs, sandbox
from runners.slots import lock_names
from solboard_common.config import env_bool
from solboard_common.protocol import Job, JobLimits

log = logging.getLogger(__name__)

#: A spare unused for this long is replaced (it would still serve, but code and driver state on
#: the host may have moved on, and a process should not live for ever on a maybe-stale context).
SPARE_MAX_AGE_S = 600.0
#: Its warm-up must end within this (the evaluator's own start-up limit, ``--start-limit``).
SPARE_START_LIMIT_S = 300.0
#: A job that finds its slot's spare still warming waits this long for it (it is ahead of a fresh
#: start, which takes as long on the same machine), then runs fresh.
SPARE_TAKE_WAIT_S = 60.0
#: The evaluator's own backstop: a spare nobody handed a job exits after this.
SPARE_IDLE_LIMIT_S = SPARE_MAX_AGE_S + 300.0
#: Pauses after consecutive warm-up failures (the last repeats).
FAILURE_BACKOFF_S = (2.0, 10.0, 30.0, 120.0, 300.0)
KEEPER_POLL_S = 0.2
SPARES_VARIABLE = "SOLBOARD_RUNNER_SPARES"


def enabled() -> bool:
    """Warm spares are on unless ``SOLBOARD_RUNNER_SPARES`` is false (the node reads and checks it
    at start, ``runners/cli.py``, and hands its workers 1 or 0)."""
    return env_bool(SPARES_VARIABLE, True)


def serves_single_gpu_jobs(slot: Any) -> bool:
    """Whether a slot's queue carries single-GPU jobs (``gpu.<type>.x1``), the only ones a spare can
    serve. An x<n> slot keeps none: its spare would hold all n GPU locks while warming, and be
    killed by every x1 job on one of them, for jobs that never take it."""
    return str(slot.queue).endswith(".x1")


def spare_limits(slot: Any) -> sandbox.Limits:
    """What a job with the default limits gets: the jail applies its resource limits when the spare
    starts, so a job with other limits does not fit it (``Spare.fits``)."""
    return execute.limits_from(JobLimits(), slot)


@dataclass
class Spare:
    """One jailed ``serve-spare`` process of a slot, from start until its job (or its discard)."""

    slot_key: str
    scratch: sandbox.Scratch
    running: sandbox.Running
    marker: str
    limits: sandbox.Limits
    created: float
    #: The slot's GPU locks, held while it warms up (never while a job on those GPUs runs).
    locks: list[Any] = field(default_factory=list)
    ready_event: dict[str, Any] | None = None
    ready_at: float | None = None
    #: Why it cannot take a job (None while it can, or may once warm).
    problem: str | None = None
    #: Set when it was handed a job: it never gets another.
    used: bool = False
    #: Set once its processes were waited for and cleaned up (after its job, or discarded).
    ended: bool = False

    #: Its own job uids (a fresh pair, as a job's): never the running job's.
    user: sandbox.JobUser | None = None

    @classmethod
    def start(cls, ctx: execute.Context, locks: list[Any]) -> Spare:
        user = ctx.take_user()
        scratch = sandbox.Scratch(ctx.state.scratch, user)
        marker = secrets.token_hex(8)
        limits = spare_limits(ctx.slot)
        argv = [sys.executable, "-m", "evaluator", "serve-spare", "--device", ctx.slot.device,
                "--idle-limit", f"{SPARE_IDLE_LIMIT_S:g}", "--start-limit", f"{SPARE_START_LIMIT_S:g}"]
        try:
            running = sandbox.start(sandbox.Spec(argv=argv, env=execute.job_env(ctx, scratch.path, marker),
                                                 limits=limits, user=user, hide=execute.hidden_state(ctx),
                                                 slot=ctx.slot.key),
                                    scratch.path)
        except BaseException:
            scratch.__exit__()
            raise
        ctx.state.write_spare(ctx.slot.key, running.pid, ctx.slot.gpu_indices)
        return cls(ctx.slot.key, scratch, running, marker, limits, time.monotonic(), locks, user=user)

    @property
    def ready(self) -> bool:
        return self.problem is None and self.ready_event is not None

    def age(self) -> float:
        return time.monotonic() - (self.ready_at or self.created)

    def poll(self) -> None:
        """Read what it printed since: exactly one ``ready`` line is all a spare may say before
        its job; anything else, or its end, makes it unusable."""
        if self.problem is not None:
            return
        for line in self.running.new_lines():
            event = jobstream.parse_line(line)
            if event is not None and event["event"] == "not_ready":
                self.problem = f"it is not ready: {str(event.get('reason'))[:500]}"
            elif event is not None and event["event"] == "ready" and self.ready_event is None:
                self.ready_event, self.ready_at = event, time.monotonic()
            else:
                self.problem = f"it printed {line[:80]!r} before any job: tampered with"
            if self.problem is not None:
                break
        if self.problem is None and not self.running.alive():
            self.problem = f"it exited ({sandbox.signal_name(self.running.child.returncode or 0)})"
        if self.ready or self.problem is not None:
            self.release_locks()

    def wait_ready(self, limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while True:
            self.poll()
            if self.ready or self.problem is not None:
                return
            if time.monotonic() >= deadline:
                self.problem = f"not ready within {limit_s:g} s"
                return
            time.sleep(0.02)

    def fits(self, job: Job, slot: Any) -> str | None:
        """Why ``job`` cannot run in this spare (the jail's limits were set when it started)."""
        if job.gpu_count > 1:
            return f"a multi-GPU job runs {job.gpu_count} fresh ranks: a spare holds one child"
        wanted = execute.limits_from(job.limits, slot)
        mine = self.limits
        same = (wanted.file_bytes, wanted.processes, wanted.address_space_bytes, wanted.stderr_bytes) == (
            mine.file_bytes, mine.processes, mine.address_space_bytes, mine.stderr_bytes)
        if not same or (wanted.cpu_seconds or 0) > (mine.cpu_seconds or 0):
            return "the job's resource limits are not the ones the spare was started with"
        return None

    def tree(self) -> set[int]:
        """Its processes: the jail's outer process and everything under it."""
        return {self.running.pid} | procs.descendants(self.running.pid)

    def run(self, request: bytes, deadline: float, cancel_requested: Callable[[], bool],
            on_line: Callable[[bytes], None] | None) -> sandbox.Result:
        """Hand it its one job and wait for the end (the sandbox cleans up as after any job)."""
        if self.used or self.problem is not None:
            raise sandbox.SandboxError(f"this spare cannot take a job: {self.problem or 'it served one already'}")
        self.used = True
        self.release_locks()
        self.running.write_stdin(request)
        try:
            return self.running.wait(deadline, cancel_requested, on_line)
        finally:
            self.ended = True

    def discard(self) -> None:
        """Kill it and everything of its job uids (once), remove its scratch folder."""
        self.release_locks()
        if not self.ended:
            self.ended = True
            self.running.kill()
        self.scratch.__exit__()

    def release_locks(self) -> None:
        for handle in self.locks:
            handle.close()
        self.locks = []


class SpareKeeper:
    """The warm spare of one slot, kept by a thread of the slot's worker while the slot is idle.

    The worker's job path calls ``take`` when a job arrives (the slot is busy from then on: no
    spare starts) and ``release`` once the job and its clean-up are over."""

    def __init__(self, ctx: execute.Context, may_start: Callable[[], bool] = lambda: True,
                 before_first: Callable[[], None] = lambda: None) -> None:
        self.ctx = ctx
        self.may_start = may_start
        #: Run once before the first spare: leftovers of a worker that died run as the job user.
        self.before_first = before_first
        self._first = True
        self._cond = threading.Condition()
        self._spare: Spare | None = None
        self._busy = False
        self._stopped = False
        self._failures = 0
        self._next_try = 0.0
        #: Spares started (for tests and the benchmark's record).
        self.started = 0
        self._thread = threading.Thread(target=self._loop, name=f"solboard-spare-{ctx.slot.key}", daemon=True)

    def start(self) -> SpareKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        with self._cond:
            self._drop("the worker stops")

    def spare(self) -> Spare | None:
        """The current spare (tests and diagnostics only: the keeper owns it)."""
        with self._cond:
            return self._spare

    # ------------------------------------------------------------ the job's side

    def take(self, job: Job) -> Spare | None:
        """The slot's spare for ``job`` if one is ready or becomes ready (the slot is busy from
        now on); None when there is none or it does not fit: the job then starts fresh."""
        with self._cond:
            self._busy = True
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        spare.wait_ready(SPARE_TAKE_WAIT_S)
        reason = spare.problem or spare.fits(job, self.ctx.slot)
        if reason is None and spare.age() > SPARE_MAX_AGE_S:
            reason = f"older than {SPARE_MAX_AGE_S:g} s"
        self.ctx.state.clear_spare(self.ctx.slot.key)
        if reason is not None:
            log.warning("slot %s: spare not used for %s: %s", self.ctx.slot.key, job.job_id, reason)
            spare.discard()
            return None
        return spare

    def release(self) -> None:
        """The job is over (its processes killed, its GPUs checked): a new spare may start."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    # ------------------------------------------------------------ the keeper's thread

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                if not self._busy:
                    try:
                        self._tend()
                    except Exception:  # the keeper must outlive any one failure
                        log.exception("slot %s: keeping a warm spare failed", self.ctx.slot.key)
                        self._backoff()
                self._cond.wait(KEEPER_POLL_S)

    def _tend(self) -> None:
        """Replace an unusable or old spare; start one when there is none and the slot may."""
        spare = self._spare
        if spare is not None:
            spare.poll()
            if spare.ready:
                self._failures = 0
            if spare.problem is None and not (spare.ready and spare.age() > SPARE_MAX_AGE_S):
                return
            warming_failed = spare.problem is not None and spare.ready_event is None
            self._drop(spare.problem or f"older than {SPARE_MAX_AGE_S:g} s")
            if warming_failed:
                self._backoff()
        if time.monotonic() < self._next_try or not self.may_start():
            return
        locks = self.ctx.state.try_gpu_locks(self.ctx.slot.gpu_indices)
        if locks is None:  # a job runs (or waits to run) on these GPUs: not now
            return
        try:
            if self._first:
                self.before_first()
                self._first = False
            self._spare = Spare.start(self.ctx, locks)
        except BaseException:
            for handle in locks:
                handle.close()
            raise
        self.started += 1

    def _drop(self, why: str) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        log.info("slot %s: spare replaced: %s", self.ctx.slot.key, why)
        self.ctx.state.clear_spare(self.ctx.slot.key)
        spare.discard()

    def _backoff(self) -> None:
        pause = FAILURE_BACKOFF_S[min(self._failures, len(FAILURE_BACKOFF_S) - 1)]
        self._failures += 1
        self._next_try = time.monotonic() + pause


def stop_overlapping_spares(ctx: execute.Context) -> list[str]:
    """Kill other slots' spares on this slot's GPUs (a spare's CUDA context must not sit on a GPU
    a job is timed on, and NVML would count it as holding the GPU). Their keepers replace them once
    the GPUs are free again. Returns the slots whose spare was stopped."""
    mine = set(lock_names(ctx.slot.gpu_indices))
    stopped = []
    for key, entry in ctx.state.spares().items():
        if key == ctx.slot.key or not mine & set(entry.get("locks", [])):
            continue
        pgid = int(entry["pgid"])
        if _is_spare_jail(pgid):
            procs.kill_group(pgid)
            stopped.append(key)
    return stopped


def _is_spare_jail(pid: int) -> bool:
    """The pid still names a spare's jail (not a process that got the number since)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(part.endswith(b"jail.py") for part in argv) and b"serve-spare" in argv
