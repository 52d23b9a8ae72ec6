"""Warm spares: each runner slot keeps the evaluator processes of its *next* jobs started.

A job's evaluator spends seconds before it can judge anything: Python and torch imports, the CUDA
contexts, the warm-up of the trusted paths, the child's own start (7.7-11.8 s on the H200). So a
slot keeps ``python -m evaluator serve-spare`` processes ahead of its jobs, each in the same jail
as a job (a fresh scratch folder, a fresh pair of job uids, every limit a job gets), in two parts
(``evaluator/harness/single/warm.py``):

- **staged**: started while the slot may be busy with a job, it imports everything and starts its
  child and its witness session without touching the device, then waits. The running job cannot
  reach it (another pid namespace, other uids, another scratch folder) and NVML sees no context
  of it, so the job's witness still sees only its own processes.
- **warm**: told to warm up (one line on its stdin) only while it holds the slot's GPU locks and
  no job runs on those GPUs: after the previous job's GPU check, or, when the slot is idle, by the
  keeper's thread. It makes its CUDA contexts and says ``ready``.

Rules (docs/runners.md, docs/security.md "Warm spares"):

- A spare serves exactly one job and then is gone with its scratch folder; one that is not used is
  killed, never handed to a later job. It knows nothing of its job before it gets it.
- At most one spare of a slot is warm (or warming): the next one to serve. The others stay staged.
  A staged spare found holding a GPU context is discarded.
- It is replaced when it died, printed anything but its ``staged`` and ``ready`` lines in order,
  said ``not_ready``, or is older than ``SPARE_MAX_AGE_S``. A job that finds no spare runs in a
  fresh process, as before. Warm-ups that keep failing are retried with a growing pause.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import jobstream
from runners import execute, nvml_probe, procs, sandbox
from runners.slots import lock_names
from solboard_common.config import env_bool
from solboard_common.protocol import Job, JobLimits

log = logging.getLogger(__name__)

#: A spare unused for this long is replaced (it would still serve, but code and driver state on
#: the host may have moved on, and a process should not live for ever on a maybe-stale context).
SPARE_MAX_AGE_S = 600.0
#: Each part of its start (staging, the device's warm-up) must end within this (the evaluator's
#: own start-up limit, ``--start-limit``).
SPARE_START_LIMIT_S = 300.0
#: A job that finds its slot's next spare still starting waits this long for it (it is ahead of a
#: fresh start, which takes as long on the same machine), then runs fresh.
SPARE_TAKE_WAIT_S = 60.0
#: The evaluator's own backstop: a spare nobody hands a word or a job exits after this.
SPARE_IDLE_LIMIT_S = SPARE_MAX_AGE_S + 300.0
#: Pauses after consecutive warm-up failures (the last repeats).
FAILURE_BACKOFF_S = (2.0, 10.0, 30.0, 120.0, 300.0)
KEEPER_POLL_S = 0.2
SPARES_VARIABLE = "SOLBOARD_RUNNER_SPARES"
#: How many spares a slot keeps started (one warm or warming, the rest staged).
DEPTH_VARIABLE = "SOLBOARD_RUNNER_SPARE_DEPTH"
#: Two on a GPU: a loop's next job comes ~2-3 s after the last one started, staging takes ~4-5 s
#: on the H200 (imports, ncu's start), so one spare staged per job would make each job wait for
#: the rest of it; with two, each has two jobs' time. One on the CPU development device, whose
#: few cores the staging imports would otherwise crowd.
DEFAULT_DEPTH = {"cuda": 2, "cpu": 1}
#: A staged spare's niceness, when the runner is root (it can set it back to 0 before the warm-up):
#: beside a running job it takes only the CPU time the job leaves idle.
STAGING_NICE = 19
#: The line that tells a staged spare to make its contexts (``evaluator/commands/spare_cmd.py``).
WARM_LINE = json.dumps({"warm": True}).encode() + b"\n"


def enabled() -> bool:
    """Warm spares are on unless ``SOLBOARD_RUNNER_SPARES`` is false (the node reads and checks it
    at start, ``runners/cli.py``, and hands its workers 1 or 0)."""
    return env_bool(SPARES_VARIABLE, True)


#: Whether a slot starts spares while one of its jobs runs: on a GPU (the timed work is the
#: device's; staging makes no CUDA call), not on the CPU device, whose timed work is the host's own
#: (staging beside a job lengthened its CPU-timed stages by 40-45% on a 2-core machine).
BESIDE_VARIABLE = "SOLBOARD_RUNNER_STAGE_BESIDE_JOBS"


def stages_beside_jobs(slot: Any) -> bool:
    return env_bool(BESIDE_VARIABLE, str(slot.device) == "cuda")


def depth(slot: Any) -> int:
    """Spares a slot keeps started: ``SOLBOARD_RUNNER_SPARE_DEPTH``, else by device."""
    import os

    text = os.environ.get(DEPTH_VARIABLE, "").strip()
    return max(1, int(text)) if text else DEFAULT_DEPTH.get(str(slot.device), 1)


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
    gpu_indices: tuple[int, ...]
    scratch: sandbox.Scratch
    running: sandbox.Running
    marker: str
    limits: sandbox.Limits
    created: float
    #: Its own job uids (a fresh pair, as a job's): never the running job's, never another spare's.
    user: sandbox.JobUser | None = None
    #: The slot's GPU locks while it warms its device, when the keeper warms it (a job that warms
    #: it holds them itself); released once it is ready.
    locks: list[Any] = field(default_factory=list)
    staged_event: dict[str, Any] | None = None
    staged_at: float | None = None
    #: When it was told to warm its device (None: still only staged).
    warm_sent_at: float | None = None
    #: Whether the job that took it told it (the spare was not warm when its job came).
    warmed_by_job: bool = False
    ready_event: dict[str, Any] | None = None
    ready_at: float | None = None
    #: Why it cannot take a job (None while it can, or may once ready).
    problem: str | None = None
    #: Set when it was handed a job: it never gets another.
    used: bool = False
    #: Set once its processes were waited for and cleaned up (after its job, or discarded).
    ended: bool = False
    #: A name for it alone, put in its job's report (``sandbox.warm_spare_id``): one spare, one job.
    ident: str = field(default_factory=lambda: secrets.token_hex(6))

    @classmethod
    def start(cls, ctx: execute.Context) -> Spare:
        """A new spare, staging (it touches no device until it is told to warm)."""
        user = ctx.take_user()
        scratch = sandbox.Scratch(ctx.state.scratch, user)
        marker = secrets.token_hex(8)
        limits = spare_limits(ctx.slot)
        argv = [sys.executable, "-m", "evaluator", "serve-spare", "--device", ctx.slot.device,
                "--idle-limit", f"{SPARE_IDLE_LIMIT_S:g}", "--start-limit", f"{SPARE_START_LIMIT_S:g}"]
        try:
            running = sandbox.start(
                sandbox.Spec(
                    argv=argv,
                    env=execute.job_env(ctx, scratch.path, marker),
                    limits=limits,
                    user=user,
                    hide=execute.hidden_state(ctx),
                    slot=ctx.slot.key,
                    nice=STAGING_NICE if user is not None else 0,
                ),
                scratch.path,
            )
        except BaseException:
            scratch.__exit__()
            raise
        return cls(
            ctx.slot.key, ctx.slot.gpu_indices, scratch, running, marker, limits, time.monotonic(), user=user
        )

    @property
    def staged(self) -> bool:
        return self.problem is None and self.staged_event is not None

    @property
    def warming(self) -> bool:
        """Told to warm its device (it may be ready already)."""
        return self.problem is None and self.warm_sent_at is not None

    @property
    def ready(self) -> bool:
        return self.problem is None and self.ready_event is not None

    def age(self) -> float:
        return time.monotonic() - (self.ready_at or self.staged_at or self.created)

    def poll(self) -> None:
        """Read what it printed since: ``staged``, then (once told to warm) ``ready`` are all a
        spare may say before its job; anything else, or its end, makes it unusable."""
        if self.problem is not None:
            return
        for line in self.running.new_lines():
            self.problem = self._take_line(line)
            if self.problem is not None:
                break
        if self.problem is None and not self.running.alive():
            self.problem = f"it exited ({sandbox.signal_name(self.running.child.returncode or 0)})"
        if self.ready or self.problem is not None:
            self.release_locks()

    def _take_line(self, line: bytes) -> str | None:
        event = jobstream.parse_line(line)
        kind = event["event"] if event is not None else None
        if event is not None and kind == "not_ready":
            return f"it is not ready: {str(event.get('reason'))[:500]}"
        if kind == "staged" and self.staged_event is None:
            self.staged_event, self.staged_at = event, time.monotonic()
            return self._off_device_problem()
        if kind == "ready" and self.warm_sent_at is not None and self.ready_event is None:
            self.ready_event, self.ready_at = event, time.monotonic()
            return None
        return f"it printed {line[:80]!r} out of turn: tampered with"

    def _off_device_problem(self) -> str | None:
        """A staged spare holds no CUDA context (it would crowd a job running on the GPU and void
        its witness): NVML must not list any process of it."""
        holding = sorted(set(nvml_probe.processes_on(self.gpu_indices)) & self.tree())
        return f"it held a CUDA context while staged (pids {holding})" if holding else None

    def warm(self, locks: list[Any], by_job: bool = False) -> None:
        """Tell the staged spare to make its contexts: only when no job runs on its GPUs (``locks``
        are the slot's GPU locks, held until it is ready; empty when the caller holds them)."""
        if not self.staged or self.warm_sent_at is not None:
            raise sandbox.SandboxError(
                f"this spare cannot warm up: {self.problem or 'not staged, or warming'}"
            )
        self.locks, self.warmed_by_job = locks, by_job
        self.warm_sent_at = time.monotonic()
        procs.renice(self.tree(), 0)  # its contexts, and then its job, at the job's priority
        self.running.write_stdin(WARM_LINE, close=False)

    def wait_for(self, condition: Callable[[], bool], limit_s: float, what: str) -> None:
        """Poll until ``condition`` holds or it has a problem (``what`` names the wait)."""
        deadline = time.monotonic() + limit_s
        while True:
            self.poll()
            if condition() or self.problem is not None:
                return
            if time.monotonic() >= deadline:
                self.problem = f"not {what} within {limit_s:g} s"
                return
            time.sleep(0.02)

    def wait_ready(self, limit_s: float) -> None:
        self.wait_for(lambda: self.ready, limit_s, "ready")

    def wait_staged(self, limit_s: float) -> None:
        self.wait_for(lambda: self.staged, limit_s, "staged")

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

    def phases(self, handed_over: float) -> dict[str, float]:
        """The runner's clock around this spare, and the spare's own split of its start-up
        (``spare.*``, what its ``ready`` line said), for the report's ``phase_seconds``."""
        phases: dict[str, float] = {}
        if self.staged_at is not None:
            phases["runner.spare_staged"] = round(self.staged_at - self.created, 3)
        if self.warm_sent_at is not None and self.ready_at is not None:
            phases["runner.spare_warm"] = round(self.ready_at - self.warm_sent_at, 3)
            phases["runner.spare_ready_to_hand_over"] = round(handed_over - self.ready_at, 3)
        phases["runner.spare_warmed_by_job"] = 1.0 if self.warmed_by_job else 0.0
        split = (self.ready_event or {}).get("start_up_seconds")
        if isinstance(split, dict):
            phases.update({f"spare.{name}": round(float(value), 3) for name, value in split.items()
                           if isinstance(value, (int, float)) and not isinstance(value, bool)})
        return phases

    def run(self, request: bytes, deadline: float, cancel_requested: Callable[[], bool],
            on_line: Callable[[bytes], None] | None) -> sandbox.Result:
        """Hand it its one job and wait for the end (the sandbox cleans up as after any job)."""
        if self.used or not self.ready:
            reason = "it served one already" if self.used else self.problem or "it is not ready"
            raise sandbox.SandboxError(f"this spare cannot take a job: {reason}")
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


def stop_overlapping_spares(ctx: execute.Context) -> list[str]:
    """Kill other slots' warm spares on this slot's GPUs (a spare's CUDA context must not sit on a
    GPU a job is timed on, and NVML would count it as holding the GPU). Only a spare told to warm is
    recorded (``Spare.warm``): a staged one holds no context and stays. Their keepers replace them
    once the GPUs are free again. Returns the slots whose spare was stopped."""
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
