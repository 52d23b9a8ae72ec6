"""One job on one slot: the evaluator command line, its sandbox, and the JobResult it becomes.

Never raises for anything the job does: every failure turns into a JobResult whose outcome and
message say precisely what happened (the site maps it to a status).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from evaluator import jobstream
from evaluator.report import EvaluationReport
from evaluator.vocabulary import Mode
from runners import jobpolicy, sandbox
from runners.identities import Rotation
from runners.procs import MARKER_VARIABLE
from runners.slots import Slot, StateDir, safe_name
from solboard_common.config import REPO_ROOT, var_dir
from solboard_common.protocol import Job, JobLimits, JobResult

if TYPE_CHECKING:
    from runners.spares import Spare

REPORT_MAX_BYTES = jobpolicy.sandbox_report_bytes()
ARTIFACTS_MAX_BYTES = 256 << 20
SOURCE_NAMES = {"python": "submission.py", "ptx": "submission.ptx", "cuda": "submission.cu"}


@dataclass(frozen=True)
class Context:
    node: str
    slot: Slot
    state: StateDir
    #: The slot's job uids: each job and each spare takes a fresh pair (None: the runner is not
    #: root, every job runs as the runner's user).
    users: Rotation | None
    calibration: Path | None = None

    def take_user(self) -> sandbox.JobUser | None:
        return self.users.take() if self.users is not None else None

    @property
    def runner(self) -> str:
        return self.slot.runner_name(self.node)


def evaluator_argv(job: Job, ctx: Context, inputs: JobInputs) -> list[str]:
    """A fresh evaluator process for the job; the secret seed follows on its stdin."""
    return [sys.executable, "-m", "evaluator", "run", *run_arguments(job, ctx, inputs), "--secret-seed-stdin"]


def run_arguments(job: Job, ctx: Context, inputs: JobInputs) -> list[str]:
    """What ``evaluator run`` is told about the job (the same for a fresh process and a warm
    spare): the report comes as a stream of JSON lines, a provisional one first in ranked mode."""
    limits = job.limits
    arguments = [
        job.problem, str(inputs.source),
        "--device", ctx.slot.device, "--mode", job.mode, "--json", "--stream",
        "--language", job.language,
        "--time-limit-compile", f"{limits.compile_seconds:g}",
        "--time-limit-test", f"{limits.test_seconds:g}",
        "--time-limit-ranked", f"{limits.ranked_seconds:g}",
        "--log-bytes", str(limits.log_bytes), "--artifacts", str(inputs.artifacts),
    ]
    if inputs.spec is not None:
        arguments += ["--spec", str(inputs.spec)]
    if inputs.calibration is not None:
        arguments += ["--calibration", str(inputs.calibration)]
    if job.shapes != "all":
        arguments += ["--shapes", job.shapes]
    if job.gpu_count > 1:  # a multi-GPU problem: one rank per GPU of the slot (docs/multigpu.md)
        arguments += ["--world-size", str(job.gpu_count)]
    return arguments


#: Tools the evaluator runs (the profile, PTX assembly, SASS evidence), found on the runner's PATH.
JOB_TOOLS = ("ncu", "ptxas", "nvcc", "cuobjdump", "nvdisasm")


def job_path() -> str:
    """The interpreter's folder, the folders of the CUDA tools the runner can see, the system's.

    Found on the H200: with only the system folders, the job's evaluator did not find ncu (it lives
    under the CUDA toolkit there) and every report said the profile was unavailable."""
    folders = [str(Path(sys.executable).parent)]
    for tool in JOB_TOOLS:
        found = shutil.which(tool)
        if found:
            folders.append(str(Path(found).parent))
    folders += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(folders))


def job_env(ctx: Context, scratch: Path, marker: str) -> dict[str, str]:
    """Everything the job sees: no broker URL, no tokens, no seed (that comes on stdin)."""
    return {
        "PATH": job_path(),
        "HOME": str(scratch),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "XDG_CACHE_HOME": str(scratch / ".cache"),
        "TRITON_CACHE_DIR": str(scratch / ".cache" / "triton"),
        "TORCH_EXTENSIONS_DIR": str(scratch / ".cache" / "torch_extensions"),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # CUDA numbers GPUs as NVML does
        "CUDA_VISIBLE_DEVICES": ctx.slot.cuda_visible_devices,  # "" hides every GPU on the CPU device
        MARKER_VARIABLE: marker,
    }


def limits_for(job: Job, slot: Slot) -> sandbox.Limits:
    return jobpolicy.limits_from(job.limits, slot, job.mode)


def limits_from(limits: JobLimits, slot: Slot, mode: Mode = "ranked") -> sandbox.Limits:
    return jobpolicy.limits_from(limits, slot, mode)


def gpu_memory_watch(job: Job, slot: Slot) -> Callable[[], str | None]:
    return jobpolicy.gpu_memory_watch(job.limits, slot)


#: Called with a provisional report (ranked mode, before its witness) while the job still runs.
OnProvisional = Callable[[EvaluationReport], None]


@dataclass
class Timeline:
    """The runner's clock (time.monotonic) around one job, for the report's ``phase_seconds``
    (``runner.*``): when the worker took the delivery, when the evaluator got the job (a fresh
    process started, or a warm spare handed its line), when each event line came back, and when
    the process had exited and the sandbox had cleaned up after it (``exit``: the result is
    delivered after that, so report -> exit is part of the wait for the witnessed result)."""

    received: float | None = None
    handed_over: float | None = None
    seen: dict[str, float] = field(default_factory=dict)
    #: Figures about the warm spare that took the job (``Spare.phases``).
    spare: dict[str, float] = field(default_factory=dict)

    def process_ended(self) -> None:
        now = time.monotonic()
        self.seen.setdefault("report", now)  # no report line before: it came with the exit
        self.seen["exit"] = now

    def phases(self) -> dict[str, float]:
        if self.handed_over is None:
            return {}
        phases = {f"runner.hand_over_to_{event}": round(when - self.handed_over, 3)
                  for event, when in self.seen.items() if event in ("provisional", "report", "exit")}
        if self.received is not None:
            phases["runner.receipt_to_hand_over"] = round(self.handed_over - self.received, 3)
        return {**self.spare, **phases}


def run(job: Job, ctx: Context, cancel_reason: Callable[[], str | None], spare: Spare | None = None,
        on_provisional: OnProvisional | None = None, received: float | None = None) -> JobResult:
    """Run the evaluator on ``job`` in a fresh sandbox, or in ``spare`` (a warm spare of this slot,
    started before the job existed; used for this job only, then gone); always returns a JobResult.
    A spare that turns out not ready when handed the job ran nothing of it: the job then runs in
    a fresh sandbox, as without one. ``received``: when the worker took the delivery (monotonic)."""
    sandbox.become_subreaper()
    timeline = Timeline(received=received)
    on_line = _event_lines(job, timeline, on_provisional)
    if spare is not None:
        answer = _run_in_spare(job, ctx, cancel_reason, spare, on_line, timeline)
        if answer is not None:
            return answer
        timeline = Timeline(received=received)
        on_line = _event_lines(job, timeline, on_provisional)
    marker = secrets.token_hex(8)
    user = ctx.take_user()
    try:
        with sandbox.Scratch(ctx.state.scratch, user) as scratch:
            root = scratch.path
            inputs = write_inputs(job, root, ctx, user)
            running = sandbox.start(
                sandbox.Spec(
                    argv=evaluator_argv(job, ctx, inputs),
                    env=job_env(ctx, root, marker),
                    limits=limits_for(job, ctx.slot),
                    user=user,
                    hide=hidden_state(ctx),
                    on_start=lambda pid: ctx.state.write_slot(
                        ctx.slot.key,
                        job_id=job.job_id,
                        evaluation_id=job.evaluation_id,
                        pgid=pid,
                        marker=marker,
                    ),
                    watch=gpu_memory_watch(job, ctx.slot),
                    slot=ctx.slot.key,
                ),
                root,
            )
            timeline.handed_over = time.monotonic()
            running.write_stdin(f"{job.seed}\n".encode())
            result = running.wait(running.started + limits_for(job, ctx.slot).wall_seconds,
                                  lambda: cancel_reason() is not None, on_line)
            timeline.process_ended()
            _keep_artifacts(inputs.artifacts, ctx.state.root / "artifacts" / safe_name(job.job_id))
    except (sandbox.SandboxError, OSError) as error:
        return job_result(job, ctx, "sandbox_error", f"the sandbox could not be set up: {error}")
    return to_job_result(job, ctx, result, cancel_reason(), timeline)


def _run_in_spare(job: Job, ctx: Context, cancel_reason: Callable[[], str | None], spare: Spare,
                  on_line: Callable[[bytes], None], timeline: Timeline) -> JobResult | None:
    """The job in ``spare``: its files into the spare's scratch folder, then one line on its stdin
    (run's arguments and the secret seed). None when the spare said it could not take it."""
    try:
        with spare.scratch:
            inputs = write_inputs(job, spare.scratch.path, ctx, spare.user)
            ctx.state.write_slot(ctx.slot.key, job_id=job.job_id, evaluation_id=job.evaluation_id,
                                 pgid=spare.running.pid, marker=spare.marker)
            request = {"run": run_arguments(job, ctx, inputs), "secret_seed": job.seed}
            timeline.handed_over = time.monotonic()
            timeline.spare = spare.phases(timeline.handed_over)
            result = spare.run(json.dumps(request).encode() + b"\n",
                               time.monotonic() + limits_for(job, ctx.slot).wall_seconds,
                               lambda: cancel_reason() is not None, on_line)
            timeline.process_ended()
            _keep_artifacts(inputs.artifacts, ctx.state.root / "artifacts" / safe_name(job.job_id))
    except (sandbox.SandboxError, OSError) as error:
        spare.discard()
        return job_result(job, ctx, "sandbox_error", f"the warm spare could not take the job: {error}")
    if spare_not_ready(result):
        return None
    answer = to_job_result(job, ctx, result, cancel_reason(), timeline)
    if answer.report is not None:
        answer.report.sandbox["warm_spare_id"] = spare.ident
    return answer


def spare_not_ready(result: sandbox.Result) -> bool:
    """The spare refused the job before running anything of it (its child died meanwhile, ...)."""
    return (result.returncode == jobstream.EXIT_NOT_READY and not result.cancelled and not result.timed_out
            and jobstream.last_event(result.stdout, "not_ready") is not None
            and jobstream.last_event(result.stdout, "report") is None)


def _event_lines(
    job: Job, timeline: Timeline, on_provisional: OnProvisional | None
) -> Callable[[bytes], None]:
    """A stdout line handler: notes when each event came (``timeline``) and hands each provisional
    report (for this job, with the runner's phases so far) to ``on_provisional``."""

    def on_line(line: bytes) -> None:
        event = jobstream.parse_line(line)
        if event is None:
            return
        timeline.seen.setdefault(str(event["event"]), time.monotonic())
        if event["event"] != "provisional" or on_provisional is None:
            return
        try:
            report = EvaluationReport.model_validate(event["report"])
        except ValidationError:
            return  # the final report (or its absence) says what went wrong
        if (report.problem, report.mode, report.language) == (job.problem, job.mode, job.language):
            report.phase_seconds.update(timeline.phases())
            on_provisional(report)

    return on_line


def hidden_state(ctx: Context) -> tuple[Path, ...]:
    """What the runner keeps that no job may read: its state folder (outbox, other slots' jobs,
    artifacts) and, in development, the folder with the site's SQLite files and broker."""
    return (ctx.state.root, ctx.state.scratch, var_dir())


@dataclass(frozen=True)
class JobInputs:
    """The files the evaluator reads, all inside the job's scratch folder."""

    source: Path
    spec: Path | None
    artifacts: Path
    calibration: Path | None


def write_inputs(job: Job, root: Path, ctx: Context, user: sandbox.JobUser | None) -> JobInputs:
    source = root / SOURCE_NAMES[job.language]
    source.write_text(job.source)
    spec = None
    if job.launch_spec is not None:
        spec = root / "launch_spec.json"
        spec.write_text(job.launch_spec)
    artifacts = root / "artifacts"
    artifacts.mkdir()
    if user is not None:
        os.chown(artifacts, user.owner, user.gid)
    # The cache lives in the root-only state folder: the job user reads a copy (ceilings, no secret).
    calibration = None
    if ctx.calibration is not None and ctx.calibration.is_file():
        calibration = root / "calibration.json"
        shutil.copyfile(ctx.calibration, calibration)
        os.chmod(calibration, 0o644)
    return JobInputs(source, spec, artifacts, calibration)


def _keep_artifacts(source: Path, target: Path) -> None:
    """Artifacts (e.g. .ncu-rep) outlive the scratch folder under the state folder, size-capped."""
    files = [path for path in source.rglob("*") if path.is_file() and not path.is_symlink()]
    if not files or sum(path.stat().st_size for path in files) > ARTIFACTS_MAX_BYTES:
        return
    for path in files:
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination, follow_symlinks=False)


def to_job_result(job: Job, ctx: Context, result: sandbox.Result, cancel_reason: str | None,
                  timeline: Timeline | None = None) -> JobResult:
    stderr = result.stderr.decode("utf-8", "replace")
    if result.cancelled:
        if cancel_reason == SHUTDOWN_REASON:
            return job_result(
                job, ctx, "runner_error", "released: the runner shut down during the job", stderr
            )
        return job_result(job, ctx, "cancelled", f"cancelled: {cancel_reason}", stderr)
    if result.timed_out:
        message = (
            f"the job ran past the runner's wall limit of {limits_for(job, ctx.slot).wall_seconds:g} s; "
            "its process group and its user's processes were killed"
        )
        return job_result(job, ctx, "timeout", message, stderr)
    if result.jail_failed:
        return job_result(
            job, ctx, "sandbox_error", f"the sandbox refused to start: {stderr.strip()[-2000:]}", stderr
        )
    failure = jobpolicy.job_failure(result)
    if failure is not None and jobstream.last_event(result.stdout, "report") is None:
        return job_result(job, ctx, "job_failed", f"{failure}: the submission's failure", stderr)
    report, problem = _parse_report(job, result)
    if report is None:
        return job_result(job, ctx, "evaluator_error", problem, stderr)
    report.sandbox.update(result.facts)
    report.sandbox["leftover_processes_killed"] = str(result.leftovers_killed)
    if timeline is not None:
        report.phase_seconds.update(timeline.phases())
    report.sandbox["gaps"] = sandbox_gaps(ctx, result)
    return JobResult(job_id=job.job_id, evaluation_id=job.evaluation_id, runner=ctx.runner,
                     outcome="completed", report=report, log=stderr)


SHUTDOWN_REASON = "runner shutting down"


def sandbox_gaps(ctx: Context, result: sandbox.Result) -> str:
    """What the runner's sandbox did not cover on this run, in words (the report shows it): what
    it never covers, then what the jail reported missing."""
    gaps = ["disk: a per-file size limit, no quota on the scratch folder"]
    if ctx.slot.device == "cuda":
        gaps.append("host address space not limited per process (CUDA reserves terabytes); GPU memory polled "
                    "once a second, not capped by the driver")
    return "; ".join(gaps + result.gaps)


def _parse_report(job: Job, result: sandbox.Result) -> tuple[EvaluationReport | None, str]:
    status = sandbox.signal_name(result.returncode)
    tail = result.stderr.decode("utf-8", "replace").strip()[-4000:]
    if result.returncode != 0:
        return None, f"the evaluator exited with {status} without a report; stderr tail:\n{tail}"
    if result.stdout_truncated:
        return None, f"the evaluator's report exceeded {REPORT_MAX_BYTES} bytes"
    event = jobstream.last_event(result.stdout, "report")
    if event is None:
        return None, f"the evaluator printed no report; stderr tail:\n{tail}"
    try:
        report = EvaluationReport.model_validate(event["report"])
    except ValidationError as error:
        return (
            None,
            f"the evaluator printed no valid report ({error.error_count()} errors); stderr tail:\n{tail}",
        )
    if (report.problem, report.mode, report.language) != (job.problem, job.mode, job.language):
        return None, f"the report is for {report.problem}/{report.mode}/{report.language}, not this job"
    return report, ""


def job_result(job: Job, ctx: Context, outcome: str, message: str, log: str = "") -> JobResult:
    """A JobResult without a report: the job ended (or never started) for ``outcome``, said in ``message``.

    Used here when the sandbox or the evaluator failed, and by jobflow when a job is refused before
    it runs (cancelled, shutting down, GPU still held). ``log`` keeps only its last
    ``job.limits.log_bytes`` bytes, the part that says why.
    """
    return JobResult(job_id=job.job_id, evaluation_id=job.evaluation_id, runner=ctx.runner,
                     outcome=outcome, message=message, log=log[-job.limits.log_bytes:])  # type: ignore[arg-type]
