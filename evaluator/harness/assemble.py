"""Building the ``EvaluationReport`` in the parent, re-deriving every verdict it can.

The child's sealed body is checked against what was asked (problem, shapes, mode) and validated
into models; the parent then recomputes the evaluation status from the shape statuses, the SOL
figures and scores from the timing medians (``evaluator.scoring``), rank eligibility and the
problem score, instead of trusting the child's word for any of them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ValidationError

from evaluator import HARNESS_VERSION
from evaluator.gpus import GpuSpecError, get_gpu_spec
from evaluator.harness.device import cpu_name, gpu_type, nvml_driver, nvml_name
from evaluator.harness.parent import ChildOutcome
from evaluator.harness.request import EvaluationRequest
from evaluator.problems import Problem
from evaluator.report import (
    DeviceInfo,
    EvaluationReport,
    FeatureEvidence,
    ProfileReport,
    ShapeReport,
    SolFigures,
    Status,
    worst_status,
)
from evaluator.scoring import problem_score, sol_figures

SANDBOX_NOTES = {
    "process": "fresh child process per job in its own process group; killed as a group at a limit",
    "environment": "minimal: PATH, HOME=scratch, CUDA_VISIBLE_DEVICES, LANG (no tokens, no broker URL)",
    "secrets": "secret seed sent over a pipe after the import was checked; report sealed with a per-job HMAC key",
    "gaps": "filesystem, network and memory isolation belong to the runner's sandbox (issue: runner)",
}


class ReportMismatch(Exception):
    """The sealed body does not describe the job that was asked for."""


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def fallback_device(request: EvaluationRequest) -> DeviceInfo:
    """Device facts the parent can read itself (without torch) when the child sent no report."""
    if request.device == "cpu":
        return DeviceInfo(kind="cpu", name=cpu_name(), gpu_type="cpu", development_device=True)
    name = nvml_name() or "unknown GPU"
    key, estimated = gpu_type(name)
    return DeviceInfo(
        kind="cuda",
        name=name,
        gpu_type=key,
        development_device=False,
        driver=nvml_driver(),
        peaks_estimated=estimated,
    )


def _shape_model(raw: dict[str, Any], problem: Problem) -> tuple[ShapeReport, list[str], list[str]]:
    raw = dict(raw)
    flags = [f"{raw.get('shape_id')}: {flag}" for flag in raw.pop("flags", []) or []]
    notes = [f"{raw.get('shape_id')}: {note}" for note in raw.pop("notes", []) or []]
    if raw.get("status") != "PASSED":
        raw.pop("timing", None)
        raw.pop("baseline_timing", None)
    shape = problem.shape(str(raw.get("shape_id")))
    raw["axes"], raw["ranked"] = dict(shape.axes), shape.ranked  # the catalogue's word, not the child's
    return ShapeReport.model_validate(raw), flags, notes


def _sol(
    shape: ShapeReport, problem: Problem, device: DeviceInfo, calibration: dict[str, float] | None
) -> SolFigures | None:
    if device.development_device or not shape.timing or not shape.baseline_timing:
        return None
    try:
        spec = get_gpu_spec(device.gpu_type)
    except GpuSpecError:
        return None
    counts = problem.counts(shape.axes)
    return sol_figures(
        counts, spec, shape.timing.median_us * 1e-6, shape.baseline_timing.median_us * 1e-6, calibration
    )


def check_body(body: dict[str, Any], request: EvaluationRequest, asked: list[str]) -> None:
    reported = [str(shape.get("shape_id")) for shape in body.get("shapes", [])]
    if len(set(reported)) != len(reported) or not set(reported) <= set(asked):
        raise ReportMismatch(f"the report lists shapes {reported}, the job asked for {asked}")
    if reported != asked[: len(reported)]:
        raise ReportMismatch("the report's shapes are not in the order they were asked for")


def _eligible(report: EvaluationReport, problem: Problem, secret: bool) -> bool:
    """Ranked mode with a secret seed, real GPU, all ranked shapes passed with SOL, no flag."""
    if report.mode != "ranked" or not secret or report.device.development_device:
        return False
    if report.status is not Status.PASSED:
        return False
    if report.flags:
        return False
    by_id = {shape.shape_id: shape for shape in report.shapes}
    for shape in problem.ranked_shapes:
        got = by_id.get(shape.shape_id)
        if got is None or got.status is not Status.PASSED or got.sol is None or got.sol.faster_than_light:
            return False
    return True


def build(
    request: EvaluationRequest,
    problem: Problem,
    asked: list[str],
    outcome: ChildOutcome,
    started: float,
    started_at: str,
    profiles: dict[str, ProfileReport],
    wall_seconds: float,
) -> EvaluationReport:
    body = outcome.body or {}
    status = Status(outcome.status) if outcome.status else None
    message = outcome.message
    shapes: list[ShapeReport] = []
    flags: list[str] = []
    notes: list[str] = []
    device = fallback_device(request)
    evidence = None
    if outcome.body is not None:
        try:
            check_body(body, request, asked)
            device = DeviceInfo.model_validate(body["device"])
            for raw in body.get("shapes", []):
                shape, shape_flags, shape_notes = _shape_model(raw, problem)
                shapes.append(shape)
                flags += shape_flags
                notes += shape_notes
            if body.get("status"):
                status, message = Status(body["status"]), str(body.get("message", ""))
            if body.get("evidence"):
                evidence = FeatureEvidence.model_validate(body["evidence"])
        except (ReportMismatch, ValidationError, KeyError, ValueError) as error:
            status, message, shapes, flags, notes = (
                Status.REJECTED,
                f"report does not match the job: {error}",
                [],
                [],
                [],
            )
    elif status is Status.TIMEOUT:
        shapes = [_unfinished(problem, shape_id, message) for shape_id in asked]
    return _finish(
        request,
        problem,
        device,
        status,
        message,
        shapes,
        (flags, notes),
        evidence,
        profiles,
        outcome,
        started_at,
        wall_seconds,
    )


def _unfinished(problem: Problem, shape_id: str, why: str) -> ShapeReport:
    shape = problem.shape(shape_id)
    return ShapeReport(
        shape_id=shape_id,
        axes=dict(shape.axes),
        ranked=shape.ranked,
        status=Status.TIMEOUT,
        message=f"not finished: {why}",
    )


def _finish(
    request: EvaluationRequest,
    problem: Problem,
    device: DeviceInfo,
    status: Status | None,
    message: str,
    shapes: list[ShapeReport],
    remarks: tuple[list[str], list[str]],
    evidence: FeatureEvidence | None,
    profiles: dict[str, ProfileReport],
    outcome: ChildOutcome,
    started_at: str,
    wall_seconds: float,
) -> EvaluationReport:
    flags, notes = remarks
    for shape in shapes:
        if shape.status is Status.PASSED:
            shape.sol = _sol(shape, problem, device, request.calibration)
            if shape.sol and shape.sol.faster_than_light:
                flags.append(
                    f"{shape.shape_id}: faster than light (sol_fraction {shape.sol.sol_fraction:.3f}): not ranked, for review"
                )
        shape.profile = profiles.get(shape.shape_id, shape.profile)
    evidence = _with_executed(evidence, shapes)
    statuses = [shape.status for shape in shapes] + ([status] if status else [])
    report = EvaluationReport(
        harness_version=HARNESS_VERSION,
        problem=problem.name,
        problem_version=problem.version,
        language=request.language,
        mode=request.mode,
        device=device,
        status=worst_status(statuses),
        message=message or _summary_message(shapes),
        shapes=shapes,
        flags=flags,
        notes=notes,
        evidence=evidence,
        sandbox=dict(SANDBOX_NOTES),
        started_at=started_at,
        finished_at=now_iso(),
        wall_seconds=wall_seconds,
        phase_seconds=_phases(outcome),
        log=outcome.log,
    )
    report.rank_eligible = _eligible(report, problem, request.secret_seed is not None)
    if report.rank_eligible:
        scores = [shape.sol.score for shape in report.shapes if shape.ranked and shape.sol]
        report.problem_score = problem_score(scores)
    return report


def _phases(outcome: ChildOutcome) -> dict[str, float]:
    phases = {name: seconds for name, seconds in outcome.phase_seconds.items() if name != "done"}
    start_up = (outcome.body or {}).get("start_up_seconds")
    if isinstance(start_up, dict):
        for name, seconds in start_up.items():
            if name in ("imports", "device_init", "warm_up") and isinstance(seconds, (int, float)):
                phases[f"start_up.{name}"] = round(float(seconds), 3)
    return phases


def _with_executed(evidence: FeatureEvidence | None, shapes: list[ShapeReport]) -> FeatureEvidence | None:
    """Upgrade static PTX/CUDA evidence with the opcodes ncu saw executed (all profiled shapes)."""
    executed: dict[str, int] = {}
    for shape in shapes:
        kernels = shape.profile.kernels if shape.profile and shape.profile.available else []
        for kernel in kernels:
            for opcode, count in kernel.executed_instructions.items():
                if opcode != "total":
                    executed[opcode] = executed.get(opcode, 0) + count
    if evidence is None or not executed:
        return evidence
    from evaluator.ptx.evidence import with_executed

    return with_executed(evidence, executed)


def _summary_message(shapes: list[ShapeReport]) -> str:
    failed = [shape for shape in shapes if shape.status is not Status.PASSED]
    if not shapes:
        return "no shapes were evaluated"
    if not failed:
        return f"all {len(shapes)} shapes passed"
    first = failed[0]
    return f"{len(failed)} of {len(shapes)} shapes did not pass; {first.shape_id}: {first.status.value} {first.message}".strip()
