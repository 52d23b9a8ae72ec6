"""What the judge established about one job, before it becomes an ``EvaluationReport``.

A shape's result is a ``ShapeResult`` from the moment the judge first judges the shape to the
assembly of the report (``assemble``), where it becomes a ``ShapeReport``: the judge's own findings
are typed as the report types them (status, checks, witness, profile); the timing statistics are the
child's claim (or a multi-GPU judge's own figures) and are validated as ``TimingStats`` only there,
with everything else, so a forged figure fails where every report is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluator.problems import Shape
from evaluator.report import CorrectnessCheck, ProfileReport, Witness
from evaluator.vocabulary import Status


@dataclass
class JudgeClock:
    """What the judge's own clock established over one shape's timed calls. The witness statistics
    come from the calls it checked only (``timing_service.judge_clock``)."""

    round_trip_us: float | None
    round_trip_low_us: float | None
    #: The sample itself, rounded, for the record.
    round_trips_us: list[float]
    calls: int
    checked_calls: int


@dataclass
class ShapeResult:
    """One shape's result as the judge established it (the fields of ``ShapeReport`` it fills, and
    what the judge keeps for itself until the report is assembled)."""

    shape_id: str
    axes: dict[str, int]
    ranked: bool
    status: Status
    message: str = ""
    checks: list[CorrectnessCheck] = field(default_factory=list)
    #: The kernel's timing statistics (``TimingStats`` fields): the child's claim on one GPU.
    timing: dict[str, Any] | None = None
    #: The baseline's, timed by the judge (or, multi-GPU, by the ranks before the import).
    baseline_timing: dict[str, Any] | None = None
    telemetry_before: dict[str, Any] | None = None
    telemetry_after: dict[str, Any] | None = None
    witness: Witness | None = None
    profile: ProfileReport | None = None
    wall_seconds: float = 0.0
    #: Reasons for review and remarks of this shape; the report lists them as ``"<shape_id>: ..."``.
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The judge's clock over the timed calls (the CPU witness and the GPU's bound on host work).
    clock: JudgeClock | None = None
    #: The CUDA context was lost: the shapes after this one cannot run.
    fatal: bool = False
    #: A call under the witness wrote a wrong output: REJECTED, whatever ncu's figures say.
    witness_rejected: bool = False

    @classmethod
    def of(cls, shape: Shape, status: Status, message: str) -> ShapeResult:
        return cls(shape_id=shape.shape_id, axes=dict(shape.axes), ranked=shape.ranked, status=status,
                   message=message)

    @classmethod
    def passed(cls, shape: Shape, checks: list[CorrectnessCheck]) -> ShapeResult:
        """A shape whose every trial passed; the trials' notes become its message."""
        notes = sorted({check.message for check in checks if check.message})
        result = cls.of(shape, Status.PASSED, "; ".join(notes))
        result.checks = checks
        return result

    @classmethod
    def failed(cls, shape: Shape, status: Status, message: str,
               checks: list[CorrectnessCheck]) -> ShapeResult:
        """A shape whose last trial failed: its status, and every trial made up to it."""
        result = cls.of(shape, status, message)
        result.checks = checks
        return result

    def ends(self, status: Status, message: str) -> None:
        """The judge's verdict on this shape, replacing the one it had."""
        self.status, self.message = status, message

    def report_fields(self) -> dict[str, Any]:
        """The fields of its ``ShapeReport``: performance data only on a PASSED or REJECTED shape."""
        performance = self.status in (Status.PASSED, Status.REJECTED)
        return {
            "shape_id": self.shape_id, "axes": dict(self.axes), "ranked": self.ranked, "status": self.status,
            "message": self.message, "checks": list(self.checks),
            "timing": self.timing if performance else None,
            "baseline_timing": self.baseline_timing if performance else None,
            "telemetry_before": self.telemetry_before, "telemetry_after": self.telemetry_after,
            "profile": self.profile, "witness": self.witness if performance else None,
            "wall_seconds": self.wall_seconds,
        }


def trial_check(label: str, distribution: str, public: int | None, status: Status, message: str,
                errors: dict[str, Any]) -> CorrectnessCheck:
    """One correctness trial as the report lists it (``public``: the seed shown, None when secret)."""
    return CorrectnessCheck(
        trial=label,
        distribution=distribution,
        seed=public,
        passed=status == Status.PASSED,
        status=status,
        message=message,
        errors=errors,
    )


def timed_calls_check(checked: str, distribution: str, calls: str) -> CorrectnessCheck:
    """The check entry of a shape's timing: how many of its timed calls the judge checked."""
    return CorrectnessCheck(trial=checked, distribution=distribution, seed=None, passed=True,
                            status=Status.PASSED, message=calls, errors={})


@dataclass
class JudgeOutcome:
    """Everything the judge established about one job (``assemble`` builds the report from it)."""

    device: dict[str, Any]
    shapes: list[ShapeResult] = field(default_factory=list)
    #: A whole-job status decided by the judge (TIMEOUT, REJECTED, COMPILE_ERROR, ...), or None.
    status: Status | None = None
    message: str = ""
    evidence: dict[str, Any] | None = None
    log: str = ""
    phase_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Facts about the run that come from the judge itself (not the child's word).
    facts: dict[str, Any] = field(default_factory=dict)
    #: What the child said about itself (start-up split): informational, never a verdict.
    child_claims: dict[str, Any] = field(default_factory=dict)

    def judged(self, status: Status, message: str) -> None:
        """The job's own status: the first one decided stands."""
        if self.status is None:
            self.status, self.message = status, message
