"""The job protocol between the site and runner nodes: plain JSON over Celery, no Django here.

The site enqueues ``RUNNER_TASK`` (by name) on a ``gpu.<type>.x<n>`` queue with a ``Job``; the
runner runs the evaluator in a sandbox and sends ``SITE_RESULT_TASK`` (by name) to the ``site``
queue with a ``JobResult``. Heartbeats go to ``SITE_HEARTBEAT_TASK`` on ``site``. Both sides import
this module; the web does so without torch.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evaluator.report import EvaluationReport
from evaluator.vocabulary import COMPILE_LIMIT_S, RANKED_LIMIT_S, TEST_LIMIT_S, Device, Language, Mode

#: 1: jobs, results, job_started, heartbeats, control. 2: adds ``JobProvisional``
#: (``SITE_PROVISIONAL_TASK``): a ranked job's report before its witness, shown, never ranked.
PROTOCOL_VERSION = 2

SITE_QUEUE = "site"
RUNNER_TASK = "runners.run_job"
SITE_RESULT_TASK = "leaderboard.store_result"
SITE_HEARTBEAT_TASK = "leaderboard.runner_heartbeat"
#: Runner -> site when a delivery starts running (the site counts attempts and may answer cancel).
SITE_STARTED_TASK = "leaderboard.job_started"
#: Runner -> site when a ranked job's ranked stage ended, before its witness (protocol 2).
SITE_PROVISIONAL_TASK = "leaderboard.store_provisional"
#: Site -> one runner node, on that node's control queue (works on every transport, unlike
#: Celery broadcast, which kombu's SQLAlchemy transport does not support).
CONTROL_TASK = "runners.control"

_QUEUE_PATTERN = re.compile(r"^gpu\.(?P<gpu_type>[a-z0-9_]+)\.x(?P<count>[1-9][0-9]*)$")


def gpu_queue(gpu_type: str, gpu_count: int = 1) -> str:
    """Queue name for jobs that need ``gpu_count`` GPUs of ``gpu_type`` (``cpu`` = development)."""
    name = f"gpu.{gpu_type.lower()}.x{int(gpu_count)}"
    if not _QUEUE_PATTERN.match(name):
        raise ValueError(f"invalid GPU queue {name!r}")
    return name


_NODE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def control_queue(node: str) -> str:
    """The per-node control queue (cancel messages) for runner node ``node``."""
    if not _NODE_PATTERN.match(node):
        raise ValueError(f"invalid runner node name {node!r}")
    return f"runner.{node}.control"


def node_of_runner(runner: str) -> str:
    """Runner (slot) names are ``<node>:<slot>``; the node owns the control queue."""
    return runner.split(":", 1)[0]


def parse_gpu_queue(name: str) -> tuple[str, int]:
    match = _QUEUE_PATTERN.match(name)
    if not match:
        raise ValueError(f"not a GPU queue: {name!r}")
    return match["gpu_type"], int(match["count"])


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobLimits(_Message):
    compile_seconds: float = Field(default=COMPILE_LIMIT_S, description="Import / compile / assemble stage.")
    test_seconds: float = Field(default=TEST_LIMIT_S, description="Correctness stage.")
    ranked_seconds: float = Field(default=RANKED_LIMIT_S, description="Timing + profile stage.")
    log_bytes: int = Field(default=64 * 1024, description="Captured stdout/stderr cap.")
    memory_bytes: int | None = Field(default=None, description="Host address-space cap where CUDA allows.")
    file_bytes: int = Field(default=256 * 1024 * 1024, description="Largest file the job may write.")
    processes: int = Field(default=256, description="Process/thread cap (RLIMIT_NPROC) for the job's user.")
    gpu_memory_bytes: int | None = Field(
        default=None,
        description="GPU memory the job's processes may hold together (default: 90% of the GPUs').",
    )

    @property
    def total_seconds(self) -> float:
        return self.compile_seconds + self.test_seconds + self.ranked_seconds


class Job(_Message):
    """What a runner needs to evaluate one submission on one GPU type. No secrets but the seed."""

    protocol: int = PROTOCOL_VERSION
    job_id: str = Field(description="Unique per delivery attempt family: the evaluation's id + attempt.")
    evaluation_id: int
    attempt: int = Field(default=1, description="Delivery attempt counted by the site (bounded).")
    problem: str
    problem_version: int
    language: Language
    source: str
    source_sha256: str
    launch_spec: str | None = Field(default=None, description="PTX/CUDA launch spec when given separately.")
    mode: Mode
    seed: int = Field(description="Secret seed folded into every ranked seed; never shown to users.")
    shapes: Literal["all", "quick", "ranked"] = "all"
    gpu_type: str
    gpu_count: int = 1
    limits: JobLimits = Field(default_factory=JobLimits)


class JobResult(_Message):
    """What the runner sends back; the site validates it against the evaluation it belongs to."""

    protocol: int = PROTOCOL_VERSION
    job_id: str
    evaluation_id: int
    runner: str = Field(description="Runner node name (hostname:gpu-index or configured name).")
    outcome: Literal[
        "completed", "sandbox_error", "runner_error", "refused", "cancelled", "timeout", "evaluator_error",
        "job_failed",
    ] = Field(
        description="completed: the evaluator produced a report (whatever its verdict). "
        "timeout: the runner's overall wall limit killed the job. evaluator_error: the evaluator "
        "exited without a report (message has its exit status and stderr tail). job_failed: the job "
        "ended without a report through something inside it (its judge killed by a signal or stopped, "
        "its memory caps): the submission's failure. sandbox_error / runner_error: the runner could "
        "not run the job (the site retries, bounded). refused: the runner cannot take this job at all "
        "(its catalogue lacks the problem or holds another version of it): nothing started, and the "
        "site counts it as an attempt, so a job no runner will take ends as an error."
    )
    report: EvaluationReport | None = None
    message: str = ""
    log: str = Field(default="", description="Runner-side log tail, capped.")
    gpu_hold_seconds: float | None = Field(
        default=None,
        description="Seconds the job held its slot's GPUs by the runner's clock (GPU locks taken -> "
        "the GPU check after the job); the site bounds it by its own clock and charges it times the GPU "
        "count. None when the job never took them.",
    )


class JobProvisional(_Message):
    """Runner -> site while a ranked job still runs: its report when the ranked stage ended, before
    the witness. The site judges it as any report but stores it as provisional (never ranked,
    ``witnessed`` false); the job's JobResult replaces it. Accepted only from the runner that
    claimed the job, for the job id the site handed out."""

    protocol: int = PROTOCOL_VERSION
    job_id: str
    evaluation_id: int
    runner: str
    report: EvaluationReport


class JobStarted(_Message):
    """Runner -> site when a delivery of a job starts; the site counts it as an attempt."""

    protocol: int = PROTOCOL_VERSION
    job_id: str
    evaluation_id: int
    runner: str
    started_at: str = Field(description="ISO 8601 UTC.")


class ControlMessage(_Message):
    """Site -> runner node: stop a job (cancelled, stale delivery, or too many attempts)."""

    protocol: int = PROTOCOL_VERSION
    action: Literal["cancel"] = "cancel"
    job_id: str
    evaluation_id: int
    reason: str = ""


class GpuInfo(_Message):
    index: int
    uuid: str
    name: str
    gpu_type: str
    memory_bytes: int
    driver: str


class Heartbeat(_Message):
    """One per runner slot (a GPU set with its own worker): ``runner`` is ``<node>:<slot>``."""

    protocol: int = PROTOCOL_VERSION
    runner: str
    node: str = Field(default="", description="Runner node name: its control queue is control_queue(node).")
    device: Device = "cuda"
    healthy: bool = Field(
        default=True, description="False when the slot cannot take jobs (GPU still held, ...)."
    )
    problem: str = Field(default="", description="Why the slot is unhealthy.")
    hostname: str
    queues: list[str]
    gpus: list[GpuInfo] = Field(default_factory=list)
    current_job: str | None = None
    current_evaluation_id: int | None = None
    calibration: dict[str, float] = Field(default_factory=dict, description="Attainable ceilings.")
    version: str = ""
    sent_at: str = Field(description="ISO 8601 UTC.")
