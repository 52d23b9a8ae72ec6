"""Building the ``EvaluationReport`` from what the judge established.

Every verdict here is derived, never taken from the child: the evaluation status is the worst
shape status; SOL figures and scores come from the timing medians and the catalogue's counts
(``evaluator.scoring``); a shape faster than light, or whose median its witness does not confirm,
is REJECTED; rank eligibility needs every ranked shape PASSED and witnessed, and no flag on a
ranked shape (a flag on an unranked shape becomes a note: it cannot cost the ranking).
"""

from __future__ import annotations

import copy
import datetime as dt

from evaluator import HARNESS_VERSION
from evaluator.gpu_specs import GpuSpecError, get_gpu_spec
from evaluator.harness import identity
from evaluator.harness.device import cpu_name, gpu_type, nvml_driver, nvml_name
from evaluator.harness.outcome import JudgeOutcome, ShapeResult
from evaluator.harness.request import EvaluationRequest, world_size_of
from evaluator.problems import Problem
from evaluator.report import (
    DeviceInfo,
    EvaluationReport,
    FeatureEvidence,
    ShapeReport,
    SolFigures,
)
from evaluator.scoring import problem_score, ranked_time, sol_figures
from evaluator.vocabulary import CPU, CPU_GPU_TYPE, CUDA, RANKED, Status, worst_status

SANDBOX_FACTS = {
    "judge": "a trusted judge process owns every input and output buffer (CUDA IPC / shared files), "
    "generates the inputs, checks the outputs and times the baseline; it never runs submitted code",
    "child": "the submission runs in a fresh child process in its own process group, killed as a group "
    "at a stage limit by a watchdog; minimal environment (no tokens, no broker URL, no secret seed)",
    "timing": "the child's medians are claims, confirmed by a witness (ncu on a GPU, the judge's clock on "
    "the CPU device) before a result may rank",
}


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def fallback_device(request: EvaluationRequest) -> DeviceInfo:
    """Device facts read without torch, when the judge never got as far as reading its own."""
    if request.device == CPU:
        return DeviceInfo(kind=CPU, name=cpu_name(), gpu_type=CPU_GPU_TYPE, development_device=True)
    name = nvml_name() or "unknown GPU"
    key, estimated = gpu_type(name)
    return DeviceInfo(kind=CUDA, name=name, gpu_type=key, development_device=False, driver=nvml_driver(),
                      peaks_estimated=estimated)


def _shape_model(result: ShapeResult, problem: Problem) -> tuple[ShapeReport, list[str], list[str]]:
    shape = problem.shape(result.shape_id)
    remarks = [f"{shape.shape_id}: {flag}" for flag in result.flags]
    notes = [f"{shape.shape_id}: {note}" for note in result.notes]
    fields = result.report_fields()
    fields["axes"], fields["ranked"] = dict(shape.axes), shape.ranked  # the catalogue's word
    if not shape.ranked:  # a flag on an unranked shape never costs the ranking (it is shown)
        notes += [f"{remark} (unranked shape: shown, not held against the ranking)" for remark in remarks]
        remarks = []
    return ShapeReport.model_validate(fields), remarks, notes


def _sol(shape: ShapeReport, problem: Problem, device: DeviceInfo, calibration: dict[str, float] | None,
         world_size: int = 1) -> SolFigures | None:
    """SOL figures of the ranked times (``scoring.ranked_time``): what the child claimed only where no
    witness says more."""
    if device.development_device or not shape.ranked_time:
        return None
    try:
        spec = get_gpu_spec(device.gpu_type)
    except GpuSpecError:
        return None
    # A multi-GPU problem's counts at its world size: flops and bytes split W ways, comm per GPU.
    counts = problem.counts(problem.axes_at(shape.axes, world_size))
    return sol_figures(counts, spec, shape.ranked_time.kernel_us * 1e-6, shape.ranked_time.baseline_us * 1e-6,
                       calibration, world_size)


def faster_than_light(shape: ShapeReport) -> bool:
    """The child's own median below t_SOL (its ranked time may be higher: the claim is what is judged).
    Never with estimated counts: their t_SOL is not a bound (``below_estimated_light``)."""
    if shape.sol is None or shape.timing is None or shape.sol.counts_estimated:
        return False
    return shape.sol.faster_than_light or shape.timing.median_us < shape.sol.t_sol_us


def _judge_physics(shape: ShapeReport, problem: Problem, device: DeviceInfo,
                   calibration: dict[str, float] | None, world_size: int = 1) -> None:
    """Ranked times and SOL figures; faster than light or unconfirmed by the witness -> REJECTED
    (shown, not ranked)."""
    if shape.status is not Status.PASSED:
        return
    shape.ranked_time = ranked_time(shape)
    shape.sol = _sol(shape, problem, device, calibration, world_size)
    if shape.sol and faster_than_light(shape):
        shape.sol.faster_than_light = True
        shape.status = Status.REJECTED
        claim = shape.timing.median_us if shape.timing else 0.0
        fraction = f"{shape.sol.t_sol_us / claim:.3f}" if claim > 0 else "infinite"
        shape.message = (
            f"faster than light: {claim:.3f} us is below the speed of light {shape.sol.t_sol_us:.3f} us "
            f"(sol_fraction {fraction}, class 17)"
        )
    elif shape.witness is not None and not shape.witness.confirmed:
        shape.status = Status.REJECTED
        shape.message = shape.witness.message or "timing not confirmed by its witness"
    if below_estimated_light(shape):
        shape.message = ESTIMATED_LIGHT_NOTE


#: Shown on a shape timed below the t_SOL of derived counts (it stays PASSED and scores 1).
ESTIMATED_LIGHT_NOTE = ("faster than the derived speed of light: this problem's counts were derived "
                        "automatically at import and overestimate the work here (docs/importing.md)")


def below_estimated_light(shape: ShapeReport) -> bool:
    return bool(shape.status is Status.PASSED and shape.sol is not None and shape.sol.counts_estimated
                and shape.timing is not None and shape.timing.median_us < shape.sol.t_sol_us)


def _witnessed(shapes: list[ShapeReport], mode: str) -> bool:
    passed = [shape for shape in shapes if shape.status is Status.PASSED]
    return mode == RANKED and bool(passed) and all(
        shape.witness is not None and shape.witness.confirmed for shape in passed)


def _eligible(report: EvaluationReport, problem: Problem, secret: bool) -> bool:
    """Ranked mode with a secret seed, real GPU, every ranked shape PASSED with SOL, witnessed, no flag."""
    if report.mode != RANKED or not secret or report.device.development_device:
        return False
    if report.status is not Status.PASSED or report.flags or not report.witnessed:
        return False
    by_id = {shape.shape_id: shape for shape in report.shapes}
    for shape in problem.ranked_shapes:
        got = by_id.get(shape.shape_id)
        if got is None or got.status is not Status.PASSED or got.sol is None or got.sol.faster_than_light:
            return False
    return True


def _shapes(outcome: JudgeOutcome, problem: Problem) -> tuple[list[ShapeReport], list[str], list[str]]:
    shapes: list[ShapeReport] = []
    flags: list[str] = []
    notes: list[str] = []
    for result in outcome.shapes:
        shape, shape_flags, shape_notes = _shape_model(result, problem)
        shapes.append(shape)
        flags += shape_flags
        notes += shape_notes
    return shapes, flags, notes


def build(request: EvaluationRequest, problem: Problem, asked: list[str], outcome: JudgeOutcome,
          started_at: str, wall_seconds: float) -> EvaluationReport:
    device = DeviceInfo.model_validate(outcome.device) if outcome.device else fallback_device(request)
    world_size = world_size_of(request, problem)
    shapes, flags, notes = _shapes(outcome, problem)
    for shape in shapes:
        _judge_physics(shape, problem, device, request.calibration, world_size)
    evidence = FeatureEvidence.model_validate(outcome.evidence) if outcome.evidence else None
    evidence = _with_executed(evidence, shapes)
    status = outcome.status
    report = EvaluationReport(
        harness_version=HARNESS_VERSION, problem=problem.name, problem_version=problem.version,
        language=request.language, mode=request.mode, world_size=world_size, device=device,
        status=worst_status([shape.status for shape in shapes] + ([status] if status else [])),
        message=outcome.message or _summary_message(shapes), shapes=shapes, flags=flags,
        notes=notes + outcome.notes, evidence=evidence, sandbox=_sandbox(outcome), started_at=started_at,
        finished_at=now_iso(), wall_seconds=wall_seconds, phase_seconds=_phases(outcome), log=outcome.log,
    )
    report.witnessed = _witnessed(shapes, request.mode)
    report.rank_eligible = _eligible(report, problem, request.secret_seed is not None)
    if report.rank_eligible:
        scores = [shape.sol.score for shape in report.shapes if shape.ranked and shape.sol]
        report.problem_score = problem_score(scores)
    return report


#: The note a provisional report carries (the runner also sends it as a provisional message).
PROVISIONAL_NOTE = ("provisional: the ranked stage has ended and its witness is still running; shown, never "
                    "ranked; the final report replaces it")


def provisional(request: EvaluationRequest, problem: Problem, asked: list[str], outcome: JudgeOutcome,
                started_at: str, wall_seconds: float) -> EvaluationReport:
    """The report as it stands when the ranked stage ends: no shape witnessed yet, so it is not
    rank-eligible and has no problem score. Built from a copy: the judge's outcome goes on."""
    report = build(request, problem, asked, copy.deepcopy(outcome), started_at, wall_seconds)
    report.notes.append(PROVISIONAL_NOTE)
    return report


def _sandbox(outcome: JudgeOutcome) -> dict[str, str]:
    facts = dict(SANDBOX_FACTS)
    dumpable = outcome.facts.get("judge_not_dumpable")
    facts["judge_memory"] = ("not dumpable: a child of the same user cannot ptrace it or read its memory"
                             if dumpable else "dumpable (prctl refused): same-user processes may inspect it")
    facts["judge_identity"] = identity.describe()
    facts["job_processes"] = (
        "the judge is a subreaper: orphans of the job come back to it and every process outside the witness "
        "session is killed before and after it" if outcome.facts.get("judge_subreaper")
        else "not swept (evaluation run in-process by a caller that owns its children)")
    warm = outcome.facts.get("warm_spare")
    facts["start"] = (
        f"a warm spare: its judge and child were started and warmed before this job existed (waited "
        f"{warm['idle_seconds']:.1f} s), knew nothing of it until it was handed over, and serve this job only"
        if isinstance(warm, dict) else "a fresh judge and child, started for this job")
    return facts


#: Parts of the child's start-up it reports (its claim: informational). A warm spare's child did
#: all but ``job_warm_up`` before its job existed; the report names those ``spare_start_up.*``.
START_UP_PARTS = ("imports", "device_init", "warm_up")


def _phases(outcome: JudgeOutcome) -> dict[str, float]:
    phases = dict(outcome.phase_seconds)
    start_up = outcome.child_claims.get("start_up_seconds")
    prefix = "spare_start_up" if outcome.facts.get("warm_spare") else "child_start_up"
    if isinstance(start_up, dict):
        for name, seconds in start_up.items():
            if not isinstance(seconds, (int, float)):
                continue
            if name in START_UP_PARTS:
                phases[f"{prefix}.{name}"] = round(float(seconds), 3)
            elif name == "job_warm_up":
                phases["child_start_up.job_warm_up"] = round(float(seconds), 3)
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
    from evaluator.ptx.feature_evidence import with_executed

    return with_executed(evidence, executed)


def _summary_message(shapes: list[ShapeReport]) -> str:
    failed = [shape for shape in shapes if shape.status is not Status.PASSED]
    if not shapes:
        return "no shapes were evaluated"
    if not failed:
        return f"all {len(shapes)} shapes passed"
    first = failed[0]
    return (
        f"{len(failed)} of {len(shapes)} shapes did not pass; "
        f"{first.shape_id}: {first.status.value} {first.message}"
    ).strip()
