"""What a runner worker does with one delivery, and with a control message.

A delivery: validate the job, take the slot's GPU locks, kill anything the previous job left,
check with NVML that the GPUs are free, tell the site the job started (it counts attempts and
answers with a cancel when this delivery must not run), run it in the sandbox, check the GPUs
again, and hand the JobResult to the broker through an on-disk outbox (so a result survives a
broker hiccup or a crash between "finished" and "sent").
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from celery import Celery
from pydantic import ValidationError

from evaluator.report import EvaluationReport
from runners import execute, nvml_probe, procs, sandbox, spares
from runners.identities import UID_BLOCK_VARIABLE, Rotation, UidBlock
from runners.slots import Slot, StateDir, read_json, write_json
from runners.spare_keeper import SpareKeeper
from runners.spares import SPARE_START_LIMIT_S, Spare
from solboard_common.protocol import (
    SITE_HEARTBEAT_TASK,
    SITE_PROVISIONAL_TASK,
    SITE_QUEUE,
    SITE_RESULT_TASK,
    SITE_STARTED_TASK,
    ControlMessage,
    Heartbeat,
    Job,
    JobProvisional,
    JobResult,
    JobStarted,
)
from solboard_common.signing import (
    CREDENTIAL_VARIABLE,
    Credential,
    CredentialError,
    credential_from_environment,
    sign,
)

log = logging.getLogger(__name__)

GPU_FREE_WAIT_S = 30.0
#: wait_gpus_free polls NVML at 20, 40, 80 ... ms, then once a second.
FIRST_GPU_POLL_S = 0.02
LAST_GPU_POLL_S = 1.0
#: Set when the slot cannot take another job; celery_app stops the worker after the task.
STOP_AFTER_TASK = False


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


class Messenger:
    """Sends runner -> site messages by task name (the runner never imports the site's code),
    each signed with the node's credential (solboard_common/signing.py): the site drops unsigned ones.

    Workers find the credential in SOLBOARD_RUNNER_CREDENTIAL, set by the node supervisor."""

    def __init__(self, app: Celery, credential: Credential | None = None) -> None:
        self.app = app
        self.credential = credential

    def _credential(self) -> Credential:
        if self.credential is None:
            self.credential = credential_from_environment()
        if self.credential is None:
            raise CredentialError(f"no runner credential: {CREDENTIAL_VARIABLE} is not set")
        return self.credential

    def send(self, task: str, payload: dict[str, Any], expires: float | None = None) -> None:
        signed = sign(task, payload, self._credential())
        self.app.send_task(
            task, args=[signed], queue=SITE_QUEUE, expires=expires, retry=True,
            retry_policy={"max_retries": 10, "interval_start": 0.5, "interval_step": 1, "interval_max": 5},
        )

    def started(self, message: JobStarted) -> None:
        self.send(SITE_STARTED_TASK, message.model_dump(mode="json"))

    def result(self, result: JobResult) -> None:
        self.send(SITE_RESULT_TASK, result.model_dump(mode="json"))

    def provisional(self, message: JobProvisional) -> None:
        self.send(SITE_PROVISIONAL_TASK, message.model_dump(mode="json"))

    def heartbeat(self, beat: Heartbeat, expires: float) -> None:
        self.send(SITE_HEARTBEAT_TASK, beat.model_dump(mode="json"), expires=expires)


@cache
def context() -> execute.Context:
    """This worker's slot, from the environment the supervisor started it with."""
    scratch = os.environ.get("SOLBOARD_RUNNER_SCRATCH")
    state = StateDir(Path(os.environ["SOLBOARD_RUNNER_STATE"]), Path(scratch) if scratch else None)
    slot = Slot.from_json(os.environ["SOLBOARD_RUNNER_SLOT"])
    calibration = os.environ.get("SOLBOARD_RUNNER_CALIBRATION") or None
    return execute.Context(
        node=os.environ["SOLBOARD_RUNNER_NODE"], slot=slot, state=state,
        users=_job_uids(), calibration=Path(calibration) if calibration else None,
    )


def _job_uids() -> Rotation | None:
    """The block of job uids the supervisor claimed for this slot (none when it is not root)."""
    block = os.environ.get(UID_BLOCK_VARIABLE)
    return Rotation(UidBlock.from_text(block)) if block else None


def handle_job(payload: dict[str, Any], messenger: Messenger) -> None:
    received = time.monotonic()
    ctx = context()
    try:
        job = Job.model_validate(payload)
    except ValidationError as error:
        _reject_malformed(payload, ctx, messenger, error)
        return
    reason = ctx.state.cancel_reason(job.job_id)
    if reason is not None:
        deliver(
            ctx,
            messenger,
            execute.job_result(job, ctx, "cancelled", f"cancelled before it started: {reason}"),
        )
        return
    if ctx.state.shutting_down():  # not started, so no attempt is counted for it
        deliver(
            ctx,
            messenger,
            execute.job_result(job, ctx, "runner_error", "released: the runner is shutting down"),
        )
        return
    mismatch = catalogue_mismatch(job)
    if mismatch:  # nothing started: the site counts the refusal and hands the job on, or ends it
        deliver(ctx, messenger, execute.job_result(job, ctx, "refused", mismatch))
        return
    keeper = _keeper
    spare = keeper.take(job) if keeper is not None else None  # the slot is busy from here on
    try:
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):
            locked = time.monotonic()
            result = _run_locked(job, ctx, messenger, spare, received)
            # What the site charges as GPU time (bounded there by its own clock): the locks taken
            # -> the GPU check after the job found its GPUs free.
            result.gpu_hold_seconds = round(time.monotonic() - locked, 3)
            following = keeper.warm_next_after_job() if keeper is not None and not STOP_AFTER_TASK else None
            deliver(ctx, messenger, result)
            if following is not None and keeper is not None:  # its contexts are made under these locks
                keeper.wait_warm(following, SPARE_START_LIMIT_S)
    finally:
        if keeper is not None:
            keeper.release()


def catalogue_mismatch(job: Job) -> str:
    """Why this runner cannot evaluate ``job`` as asked, or "": its catalogue lacks the problem or
    has another version of it (a deploy in progress; a report of the wrong version would be refused
    by the site after the whole job ran).

    Before refusing, the catalogue is read from disk again: a problem imported (or a version
    synced) while the runner was up, as ``import_problems`` under ``make run`` does, is on disk, and
    the job's evaluator reads the disk, not this process's copy. Without this the runner refused
    such a job until it was restarted, and the site handed it back at once, over and over."""
    from evaluator.problems import load_catalogue

    reason = _catalogue_mismatch(load_catalogue(), job)
    if reason:
        load_catalogue.cache_clear()
        try:
            reason = _catalogue_mismatch(load_catalogue(), job)
        except Exception as error:  # a broken folder on disk: no job could load it either
            return f"this runner's catalogue does not load: {error}"
    return reason


def _catalogue_mismatch(catalogue: dict[str, Any], job: Job) -> str:
    problem = catalogue.get(job.problem)
    if problem is None:
        return f"this runner's catalogue has no problem {job.problem!r}"
    if problem.version != job.problem_version:
        return (f"this runner's catalogue has {job.problem} v{problem.version}; the job is for "
                f"v{job.problem_version}")
    return ""


def _run_locked(job: Job, ctx: execute.Context, messenger: Messenger, spare: Spare | None = None,
                received: float | None = None) -> JobResult:
    try:
        holders = _clear_the_way(ctx, spare)
        if spare is not None and (holders or not spare.running.alive()):
            spare.discard()  # the job user was killed to free the GPU, or the spare died meanwhile
            spare = None
        if holders:
            mark_unhealthy(ctx, f"GPU(s) {ctx.slot.cuda_visible_devices} still held by pid(s) {holders}")
            return execute.job_result(
                job, ctx, "runner_error", f"GPU still held by pid(s) {holders}; job released"
            )
        spare = _warmed_for_job(spare)
        ctx.state.write_slot(
            ctx.slot.key, job_id=job.job_id, evaluation_id=job.evaluation_id, since=time.time()
        )
        messenger.started(JobStarted(job_id=job.job_id, evaluation_id=job.evaluation_id, runner=ctx.runner,
                                     started_at=now_iso()))
    except BaseException:
        if spare is not None:  # never handed its job: it must not wait for another
            spare.discard()
        raise
    try:
        result = execute.run(job, ctx, lambda: cancel_reason(ctx, job.job_id), spare=spare,
                             on_provisional=lambda report: send_provisional(ctx, messenger, job, report),
                             received=received)
    finally:
        marker = ctx.state.read_slot(ctx.slot.key).get("marker")
        ctx.state.write_slot(ctx.slot.key, job_id=None, evaluation_id=None, marker=marker)
        ctx.state.cancel_file(job.job_id).unlink(missing_ok=True)
    holders = wait_gpus_free(ctx)
    if holders:
        mark_unhealthy(ctx, f"the last job left GPU(s) held by pid(s) {holders}")
    if result.report is not None:
        result.report.sandbox["gpu_check"] = _gpu_check_text(ctx, holders)
    return result


def _warmed_for_job(spare: Spare | None) -> Spare | None:
    """The job's spare, ready: one that is only staged makes its contexts now, under the job's GPU
    locks and after its GPU check (no other job runs there). None when it fails: the job runs fresh."""
    if spare is None or spare.ready:
        return spare
    if not spare.warming:
        spare.warm([], by_job=True)
    spare.wait_ready(SPARE_START_LIMIT_S)
    if spare.ready:
        return spare
    log.warning("spare not used: %s", spare.problem)
    spare.discard()
    return None


def _clear_the_way(ctx: execute.Context, spare: Spare | None) -> list[int]:
    """Before a job: other slots' spares off its GPUs, what a previous job left killed (but the
    slot's own spare, about to serve this job); returns the pids that still hold its GPUs."""
    stopped = spares.stop_overlapping_spares(ctx)
    if stopped:
        log.info("slot %s: stopped the spares of %s on its GPUs", ctx.slot.key, ", ".join(stopped))
    kill_previous(ctx, spare)
    return wait_gpus_free(ctx, spare)


def send_provisional(ctx: execute.Context, messenger: Messenger, job: Job, report: EvaluationReport) -> None:
    """Best effort: the final result follows whatever happens to this one (it is not in the outbox)."""
    message = JobProvisional(
        job_id=job.job_id, evaluation_id=job.evaluation_id, runner=ctx.runner, report=report
    )
    try:
        messenger.provisional(message)
    except Exception:  # a broker hiccup costs the early answer, never the job
        log.warning("provisional result of %s not sent", job.job_id)


def _gpu_check_text(ctx: execute.Context, holders: list[int]) -> str:
    if ctx.slot.device != "cuda":
        return "not applicable (CPU device)"
    return f"GPUs still held by {holders}" if holders else "NVML: no process left on the job's GPUs"


def cancel_reason(ctx: execute.Context, job_id: str) -> str | None:
    reason = ctx.state.cancel_reason(job_id)
    if reason is None and ctx.state.shutting_down():
        return execute.SHUTDOWN_REASON
    return reason


def kill_previous(ctx: execute.Context, spare: Spare | None = None) -> None:
    """Whatever a previous job (maybe of a worker that died) left behind dies before the next:
    every process of the slot's job uids but the slot's spare."""
    previous = ctx.state.read_slot(ctx.slot.key)
    marker = previous.get("marker")
    if ctx.users is not None:
        _kill_job_users(ctx, spare)
    elif marker:
        procs.kill_marked(str(marker))


def _kill_job_users(ctx: execute.Context, spare: Spare | None) -> None:
    """Every process of the slot's uids dies but the job's spare and the spares the keeper keeps
    for later jobs (each holds a pair of its own)."""
    if ctx.users is None:
        return
    keep = spare.tree() if spare is not None else set()
    keeper = _keeper
    if keeper is None:
        procs.kill_uids_except(set(ctx.users.uids()), keep)
        return
    with keeper.frozen() as kept:
        procs.kill_uids_except(set(ctx.users.uids()) - kept, keep)


def wait_gpus_free(
    ctx: execute.Context, spare: Spare | None = None, wait_s: float = GPU_FREE_WAIT_S
) -> list[int]:
    """Pids holding the slot's GPUs (none but the slot's own spare may), after up to ``wait_s``
    of killing the job user's other processes."""
    deadline = time.monotonic() + wait_s
    pause = FIRST_GPU_POLL_S
    while True:
        keep = spare.tree() if spare is not None else set()
        holders = [
            pid
            for pid in nvml_probe.processes_on(ctx.slot.gpu_indices)
            if pid != os.getpid() and pid not in keep
        ]
        if not holders or time.monotonic() >= deadline:
            return holders
        if _keeper is not None:  # a staged spare must hold nothing there: it goes
            _keeper.drop_holders(set(holders))
        _kill_job_users(ctx, spare)
        # On the H200, right after a job, NVML still listed the judge that had just exited, and a
        # flat one-second pause put 1.2 s between the evaluator's final report and its delivery
        # (a vector_add job: report 2.0 s after receipt, delivered at 3.2 s). Short pauses first.
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, LAST_GPU_POLL_S)


def mark_unhealthy(ctx: execute.Context, problem: str) -> None:
    global STOP_AFTER_TASK
    log.error("slot %s unhealthy: %s", ctx.slot.key, problem)
    write_json(
        health_file(ctx.state, ctx.slot.key), {"healthy": False, "problem": problem, "at": time.time()}
    )
    STOP_AFTER_TASK = True


def health_file(state: StateDir, key: str) -> Path:
    return state.root / "slots" / f"{key}.health.json"


def read_health(state: StateDir, key: str) -> tuple[bool, str]:
    data = read_json(health_file(state, key)) or {}
    return bool(data.get("healthy", True)), str(data.get("problem", ""))


def deliver(ctx: execute.Context, messenger: Messenger, result: JobResult) -> None:
    deliver_via(ctx.state, messenger, result)


def deliver_via(state: StateDir, messenger: Messenger, result: JobResult) -> None:
    """Outbox first, then the broker: a crash in between leaves the file for the supervisor."""
    path = state.outbox_file(result.job_id)
    path.write_text(result.model_dump_json())
    try:
        messenger.result(result)
    except Exception:
        log.exception("result of %s not sent; left in the outbox", result.job_id)
        return
    path.unlink(missing_ok=True)


def flush_outbox(state: StateDir, messenger: Messenger, older_than_s: float = 30.0) -> int:
    """Re-send results a worker wrote but did not send (the site stores each once)."""
    sent = 0
    for path in state.outbox():
        try:
            if time.time() - path.stat().st_mtime < older_than_s:
                continue
            messenger.result(JobResult.model_validate_json(path.read_text()))
        except (OSError, ValidationError):
            log.exception("outbox file %s unusable; removed", path)
        except Exception:  # broker still down: try again next round
            log.warning("broker unavailable; outbox kept")
            return sent
        path.unlink(missing_ok=True)
        sent += 1
    return sent


def _reject_malformed(
    payload: Any, ctx: execute.Context, messenger: Messenger, error: ValidationError
) -> None:
    log.error("malformed job: %s", error)
    if not isinstance(payload, dict) or not isinstance(payload.get("evaluation_id"), int):
        return  # nothing to report it against: dropped (acked) rather than redelivered forever
    result = JobResult(job_id=str(payload.get("job_id", "")), evaluation_id=payload["evaluation_id"],
                       runner=ctx.runner, outcome="runner_error",
                       message=f"malformed job message: {error.error_count()} validation errors")
    deliver(ctx, messenger, result)


def report_crash(payload: Any, messenger: Messenger, error: Exception) -> None:
    """The runner itself failed on this job: say so (the site retries, bounded) rather than let
    the acked message vanish with the evaluation stuck."""
    log.exception("runner failure on job %r", payload.get("job_id") if isinstance(payload, dict) else None)
    if not isinstance(payload, dict) or not isinstance(payload.get("evaluation_id"), int):
        return
    try:
        runner = context().runner
    except Exception:
        log.exception("no runner context")
        runner = f"{os.environ.get('SOLBOARD_RUNNER_NODE', 'unknown')}:unknown"
    result = JobResult(
        job_id=str(payload.get("job_id", "")),
        evaluation_id=payload["evaluation_id"],
        runner=runner,
        outcome="runner_error",
        message=f"runner failure: {type(error).__name__}: {error}"[:2000],
    )
    try:
        messenger.result(result)
    except Exception:
        log.exception("could not report the runner failure")


#: This worker's warm-spare keeper (None: spares off, or not a slot's worker).
_keeper: SpareKeeper | None = None


def start_spares() -> None:
    """Once the slot's worker is ready: keep a warm spare while it is idle (runners/spares.py)."""
    global _keeper
    if _keeper is not None or not spares.enabled():
        return
    ctx = context()
    if not spares.serves_single_gpu_jobs(ctx.slot):
        return  # a multi-GPU job runs W fresh ranks: a spare there would only hold the slot's locks
    sandbox.become_subreaper()  # orphans of a killed spare's jail come back to this worker
    _keeper = SpareKeeper(ctx, may_start=lambda: not STOP_AFTER_TASK and not ctx.state.shutting_down(),
                          before_first=lambda: kill_previous(ctx)).start()


def stop_spares() -> None:
    global _keeper
    keeper, _keeper = _keeper, None
    if keeper is not None:
        keeper.stop()


def handle_control(payload: dict[str, Any]) -> None:
    """A cancel for a job on this node: drop a marker the running job polls (and that a job not
    yet started checks first), so the worker kills the job's process group and frees the GPU."""
    try:
        message = ControlMessage.model_validate(payload)
    except ValidationError as error:
        log.error("malformed control message: %s", error)
        return
    state = StateDir(Path(os.environ["SOLBOARD_RUNNER_STATE"]), None)
    state.request_cancel(message.job_id, message.reason or "cancelled")
    log.info("cancel requested for %s: %s", message.job_id, json.dumps(message.reason))
