"""The warm spares of one slot, kept by a thread of the slot's worker (``runners/spares.py``).

The keeper keeps up to ``depth`` spares started, oldest first. Only the oldest may be warm or
warming (it serves the next job); the others stay staged, touching no device, so on a GPU they
start while a job runs on the slot (``beside_jobs``; not on the CPU device, whose timing is the
host's). The oldest is told to warm up:

- by the keeper's thread when the slot is idle and it can take the slot's GPU locks without
  waiting (a job running or waiting on those GPUs goes first); it holds them until it is ready;
- by the job that just ended on the slot, once its GPU check found the GPUs free, under that job's
  own locks (``warm_next_after_job``), so the next job of a loop finds it warm or warming;
- by the job that takes it, when it is still only staged (``jobflow``), under the job's locks.

The worker's job path calls ``take`` when a job arrives and ``release`` once the job and its
clean-up are over. A spare is taken once, by one job: the keeper hands it out and forgets it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runners import execute
from runners.spares import (
    FAILURE_BACKOFF_S,
    KEEPER_POLL_S,
    SPARE_MAX_AGE_S,
    SPARE_TAKE_WAIT_S,
    Spare,
    depth,
    stages_beside_jobs,
)
from solboard_common.protocol import Job

log = logging.getLogger(__name__)


class SpareKeeper:
    def __init__(self, ctx: execute.Context, may_start: Callable[[], bool] = lambda: True,
                 before_first: Callable[[], None] = lambda: None, spares: int | None = None,
                 beside_jobs: bool | None = None) -> None:
        self.ctx = ctx
        self.may_start = may_start
        #: Run once before the first spare: leftovers of a worker that died run as the job user.
        self.before_first = before_first
        self.depth = spares if spares is not None else depth(ctx.slot)
        #: Whether it starts spares (staging only) while a job of the slot runs.
        self.beside_jobs = beside_jobs if beside_jobs is not None else stages_beside_jobs(ctx.slot)
        self._first = True
        self._cond = threading.Condition()
        #: Oldest first: the first is the next to serve, and the only one that may warm up.
        self._spares: list[Spare] = []
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
            while self._spares:
                self._drop(self._spares[0], "the worker stops")

    def spare(self) -> Spare | None:
        """The next spare to serve (tests and diagnostics only: the keeper owns it)."""
        with self._cond:
            return self._spares[0] if self._spares else None

    def spares(self) -> list[Spare]:
        """All its spares, next to serve first (tests and diagnostics only)."""
        with self._cond:
            return list(self._spares)

    @contextmanager
    def frozen(self) -> Iterator[set[int]]:
        """The uids of the spares it keeps, with no spare starting meanwhile: a job's clean-up
        kills every process of the slot's uids but these (a staged spare of the next job may run
        beside it, and one being started would otherwise be caught between look and kill)."""
        with self._cond:
            yield {uid for spare in self._spares if spare.user is not None for uid in spare.user.uids}

    # ------------------------------------------------------------ the job's side

    def take(self, job: Job) -> Spare | None:
        """The slot's next spare for ``job``: warm, warming (waited for) or only staged (then the
        job warms it under its own GPU locks, ``Spare.warm``). None when there is none or it does
        not fit: the job then starts fresh. The slot is busy from now on."""
        with self._cond:
            self._busy = True
            spare = self._spares.pop(0) if self._spares else None
            self._cond.notify_all()  # the keeper may start the next one's staging now
        if spare is None:
            return None
        if spare.warming:
            spare.wait_ready(SPARE_TAKE_WAIT_S)
        else:
            spare.wait_staged(SPARE_TAKE_WAIT_S)
        reason = spare.problem or spare.fits(job, self.ctx.slot)
        if reason is None and spare.age() > SPARE_MAX_AGE_S:
            reason = f"older than {SPARE_MAX_AGE_S:g} s"
        self.ctx.state.clear_spare(self.ctx.slot.key)
        if reason is not None:
            log.warning("slot %s: spare not used for %s: %s", self.ctx.slot.key, job.job_id, reason)
            spare.discard()
            return None
        return spare

    def warm_next_after_job(self) -> Spare | None:
        """The job that just ended found its GPUs free and still holds their locks: the next spare,
        if staged, makes its contexts now, while the job's result is delivered. The caller waits
        for it (``Spare.wait_ready``) before it lets the locks go. None when there is none to warm."""
        with self._cond:
            spare = self._spares[0] if self._spares else None
            if spare is None:
                return None
            spare.poll()
            if not spare.staged or spare.warming:
                return None
            spare.warm([])
            self.ctx.state.write_spare(self.ctx.slot.key, spare.running.pid, self.ctx.slot.gpu_indices)
        return spare

    def wait_warm(self, spare: Spare, limit_s: float) -> None:
        """Wait until the spare ``warm_next_after_job`` warmed is ready (or failed): the keeper's
        thread reads the same spare, so every look happens under the keeper's lock."""
        deadline = time.monotonic() + limit_s
        with self._cond:
            while spare in self._spares and not spare.ready and spare.problem is None:
                if time.monotonic() >= deadline:
                    spare.problem = f"not ready within {limit_s:g} s of its warm-up"
                    return
                spare.poll()
                self._cond.wait(0.02)

    def release(self) -> None:
        """The job is over (its processes killed, its GPUs checked)."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def drop_holders(self, holders: set[int]) -> list[str]:
        """Discard the spares (not yet handed out) that hold any of these pids: NVML found them on
        the GPU where they should hold nothing (a staged one) or must not (a job's check)."""
        dropped = []
        with self._cond:
            for spare in list(self._spares):
                if spare.tree() & holders:
                    self._drop(spare, "it held the slot's GPU when a job needed it free")
                    dropped.append(spare.marker)
        return dropped

    # ------------------------------------------------------------ the keeper's thread

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                try:
                    self._tend()
                except Exception:  # the keeper must outlive any one failure
                    log.exception("slot %s: keeping warm spares failed", self.ctx.slot.key)
                    self._backoff()
                self._cond.wait(KEEPER_POLL_S)

    def _tend(self) -> None:
        """Drop unusable or old spares, warm the next one when the slot is idle, start new ones
        (staging only) up to the depth, also while a job runs."""
        for spare in list(self._spares):
            spare.poll()
            if spare.ready:
                self._failures = 0
            if spare.problem is None and spare.age() <= SPARE_MAX_AGE_S:
                continue
            failed = spare.problem is not None and spare.ready_event is None
            self._drop(spare, spare.problem or f"older than {SPARE_MAX_AGE_S:g} s")
            if failed:
                self._backoff()
        if not self._busy and self._spares:
            self._warm_when_idle(self._spares[0])
        may_stage = not self._busy or self.beside_jobs
        if (
            len(self._spares) < self.depth
            and may_stage
            and time.monotonic() >= self._next_try
            and self.may_start()
        ):
            if self._first:
                self.before_first()
                self._first = False
            self._spares.append(Spare.start(self.ctx))
            self.started += 1

    def _warm_when_idle(self, spare: Spare) -> None:
        if not spare.staged or spare.warming:
            return
        locks = self.ctx.state.try_gpu_locks(self.ctx.slot.gpu_indices)
        if locks is None:  # a job runs (or waits to run) on these GPUs: not now
            return
        try:
            spare.warm(locks)
        except BaseException:
            for handle in locks:
                handle.close()
            raise
        self.ctx.state.write_spare(self.ctx.slot.key, spare.running.pid, self.ctx.slot.gpu_indices)

    def _drop(self, spare: Spare, why: str) -> None:
        if spare in self._spares:
            self._spares.remove(spare)
        log.info("slot %s: spare replaced: %s", self.ctx.slot.key, why)
        if spare.warming:
            self.ctx.state.clear_spare(self.ctx.slot.key)
        spare.discard()

    def _backoff(self) -> None:
        pause = FAILURE_BACKOFF_S[min(self._failures, len(FAILURE_BACKOFF_S) - 1)]
        self._failures += 1
        self._next_try = time.monotonic() + pause
