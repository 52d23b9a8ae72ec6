"""The typed result contract of an evaluation: what the evaluator prints, what runners send back
and what the site validates and stores.

One pydantic model per concept, every field documented. Performance data (timing, SOL figures,
score) exists on a shape if and only if that shape's status is PASSED. The JSON schema of
``EvaluationReport`` is generated from these models (``python -m evaluator schema``) and
published in ``docs/report-schema.json``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evaluator.vocabulary import Device, Language, Mode, Status

REPORT_SCHEMA_VERSION = 2


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, use_enum_values=False)


# ---------------------------------------------------------------- correctness


class WorstElement(_Model):
    output: str = Field(description="Name of the output tensor.")
    index: list[int] = Field(description="Multi-index of the element.")
    got: float | None = Field(description="Value the kernel wrote (null for NaN/Inf written as such).")
    expected: float = Field(description="Reference value (computed in higher precision).")
    abs_error: float | None = Field(description="|got - expected| (null when got is not finite).")


class Tolerance(_Model):
    atol: float
    rtol: float
    matched_ratio_required: float = Field(
        default=1.0, description="Fraction of elements that must satisfy |out-ref| <= atol + rtol*|ref|."
    )


class ErrorStats(_Model):
    max_abs_error: float | None = Field(description="Largest |out - ref| over finite elements.")
    max_rel_error: float | None = Field(description="Largest |out - ref| / max(|ref|, tiny).")
    matched_ratio: float = Field(description="Fraction of elements within tolerance.")
    nonfinite_count: int = Field(description="NaN/Inf where the reference is finite (always a failure).")
    worst: list[WorstElement] = Field(default_factory=list, description="A few worst elements.")


class CorrectnessCheck(_Model):
    trial: str = Field(description="What was checked, e.g. 'seed 1 / normal' or 'timed call 17'.")
    distribution: str = Field(description="Input distribution used (normal, uniform, outliers, ...).")
    seed: int | None = Field(description="Public seed; null when it was derived from the secret seed.")
    passed: bool
    status: Status
    message: str = ""
    errors: dict[str, ErrorStats] = Field(default_factory=dict, description="Per output tensor.")


# ---------------------------------------------------------------- timing and telemetry


class TimingStats(_Model):
    """Statistics over repeated cold-L2 calls of one implementation on one shape, in microseconds."""

    method: Literal["cupti", "events", "wall"] = Field(
        description="cupti: device span from kernel timestamps; events: CUDA events + device "
        "synchronise; wall: host clock on the CPU development device."
    )
    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float
    n: int = Field(description="Number of timed calls.")
    ci95_low_us: float = Field(description="95% confidence interval of the median (order statistics).")
    ci95_high_us: float
    ci95_half_width_rel: float = Field(description="Half-width of the CI over the median.")
    converged: bool = Field(description="True when the CI target was met before the time budget ran out.")
    event_median_us: float | None = Field(
        default=None, description="Cross-check: median of CUDA-event + device-synchronise timings."
    )
    disagreement_rel: float | None = Field(
        default=None, description="(event - device span) / device span, when both exist."
    )
    ranked_source: Literal["device_span", "events", "wall"] = Field(
        description="Which measurement the ranked median comes from (events when they are clearly larger)."
    )
    kernels_per_call: list[str] = Field(
        default_factory=list, description="Names of the device operations of one call (kernels, copies)."
    )
    warmup_calls: int = 0
    host_launch_us: float | None = Field(
        default=None, description="Median host time to issue one call (launches, no synchronise), warm-up."
    )
    gate_us: float | None = Field(
        default=None,
        description="Length of the device-side gate before each timed call: the GPU spins that long "
        "while the host issues the call, so its launches are queued before it starts and the span "
        "holds no host launch latency (2 x the host launch time + 20 us, within 20-1000 us; the "
        "kernel's is at least the baseline's).",
    )
    gate_retried: bool = Field(
        default=False,
        description="The CUDA events outran the device span behind the first gate, so they were measured "
        "again behind the longest gate (1000 us) before any class-14 flag; gate_us is that gate.",
    )
    events_remeasured: bool = Field(
        default=False,
        description="The CUDA events outran the device span behind the longest gate, so a profiled batch "
        "and an events batch were measured again, one right after the other, and the class-14 flag "
        "was decided on that pair (spans and events measured apart had disagreed on an honest kernel).",
    )
    cold_l2: bool = Field(
        default=True, description="L2 flushed and persisting window reset before each call."
    )
    rank_median_us: list[float] | None = Field(
        default=None,
        description="Multi-GPU problems: each rank's own median over the same iterations (index = rank). "
        "The ranked median is the median over iterations of the slowest rank's time.",
    )
    checked_iterations: int | None = Field(
        default=None,
        description="Multi-GPU problems: timed iterations whose outputs the judge read and checked.",
    )
    late_iterations_dropped: int | None = Field(
        default=None,
        description="Multi-GPU problems on a GPU: timed iterations left out because a rank was still "
        "issuing the call when its gate ran out (host latency in the span); at most MIN_SAMPLES plus "
        "the number kept.",
    )
    judge_wait_us: list[float] | None = Field(
        default=None,
        description="Multi-GPU problems on a GPU: the judge's own clock per checked timed iteration "
        "(its wait from 'run' to the last rank's answer, less its own wake-up delay), "
        "[median, 10th percentile]. Recorded to set the tolerance of a judge's-clock witness from honest "
        "figures; not a witness yet.",
    )
    rank_diagnostics: list[dict[str, float]] | None = Field(
        default=None,
        description="Multi-GPU problems on a GPU: each rank's gate and host launch time of the call "
        "(gate_us, host_launch_us, host_launch_max_us), as the rank reports them: for diagnosis, "
        "never trusted.",
    )


class Telemetry(_Model):
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    throttle_reasons: list[str] = Field(default_factory=list, description="NVML clock-event reasons.")
    throttled: bool = Field(default=False, description="A reason other than idle/app-clocks was active.")


# ---------------------------------------------------------------- speed of light


class SolFigures(_Model):
    flops: dict[str, float] = Field(description="Exact flop counts per class (bf16_tensor, fp8_tensor, ...).")
    bytes: float = Field(description="Minimum HBM bytes: each input read once, each output written once.")
    comm_bytes: float = Field(default=0.0, description="Minimum bytes each GPU sends over its links.")
    t_sol_us: float = Field(
        description="max(flops/peak, bytes/HBM peak, comm/link peak) from datasheet peaks."
    )
    bound: Literal["compute", "memory", "link"]
    t_sol_attainable_us: float | None = Field(
        default=None, description="Same, from the runner's calibrated attainable ceilings."
    )
    sol_fraction: float = Field(description="t_SOL / t_kernel (1.0 = speed of light).")
    sol_fraction_attainable: float | None = None
    score: float = Field(description="S = 1 / (1 + (t_k - t_SOL) / (t_b - t_SOL)); 0.5 = baseline.")
    speedup: float = Field(description="t_baseline / t_kernel.")
    tflops: float = Field(description="Achieved TFLOP/s (all flop classes).")
    gbps: float = Field(description="Achieved GB/s against the minimum byte count.")
    faster_than_light: bool = Field(
        default=False, description="sol_fraction > 1: flagged for review and never ranked."
    )
    counts_estimated: bool = Field(
        default=False, description="The counts were derived automatically at import (an estimate): "
        "a time below t_SOL is a note about the counts, not a verdict (faster_than_light stays false).",
    )


# ---------------------------------------------------------------- witness


class Witness(_Model):
    """An independent measurement that confirms (or refutes) a shape's ranked median.

    The ranked median is measured inside the process that runs the submission, so it is only a
    claim. A witness is measured where the submission cannot rewrite it: Nsight Compute's kernel
    durations (``ncu``, collected by the ncu process on calls whose outputs the trusted judge
    verified) on a GPU; the judge's own clock around each verified call on the CPU development
    device (``judge_wall``). docs/security.md explains both and the tolerance.
    """

    source: Literal["ncu", "judge_wall"] = Field(description="Who measured it.")
    median_us: float = Field(
        description="The witnessed device time of a call: GPU, the lower median of the witnessed calls after "
        "the warm-up ones; CPU, the judge's round trip below.")
    n: int = Field(description="Witnessed calls (each one's outputs verified by the judge).")
    calls_us: list[float] = Field(
        default_factory=list,
        description="GPU: each witnessed call's device time as ncu measured it, in call order, the warm-up "
        "calls first (median_us is the lower median of the others). Empty on the CPU.")
    kernels_per_call: int = Field(default=0, description="Kernels ncu saw in one witnessed call.")
    warmup_calls: int = Field(
        default=0,
        description="GPU: the first calls of calls_us, made and checked but left out of median_us: "
        "a first call's one-off work (an autotune, a lazy set-up) is never what the witness measures.",
    )
    judge_round_trip_us: float | None = Field(
        default=None,
        description="How long a checked timed call kept the judge waiting, less the judge's own wake-up "
        "delay (CPU: the median, which is the witness; GPU: the 10th percentile, which bounds hidden host "
        "work).",
    )
    floor_us: float = Field(
        description="Lowest ranked median the witness accepts: "
        "median_us*(1-rel) - (abs + per-kernel allowance)."
    )
    confirmed: bool = Field(description="The ranked median is not below floor_us (and no hidden host work).")
    message: str = ""
    overhead_us: float | None = Field(
        default=None,
        description="CPU: what the judge's clock holds beyond the call itself (the pipe, both processes' "
        "wake-ups, the harness's loop), measured on the trusted baseline in the same child before the "
        "submission was imported: taken off the judge's clock to give a time the child cannot lower.")
    baseline_us: float | None = Field(
        default=None,
        description="CPU: the judge's clock (10th percentile of the checked calls) of the baseline, timed in "
        "the same child, the same way, before the import.")


class RankedTime(_Model):
    """The times a shape is scored and ranked on: ones the submission cannot lower (docs/security.md,
    "The ranked figure"). Computed from the measurements by ``evaluator.scoring.ranked_time``, in the
    evaluator and again on the site."""

    kernel_us: float = Field(
        description="The larger of the child's median and what its witness measured less the witness's "
        "allowance (GPU: ncu's time less a per-kernel offset; CPU: the judge's clock less the harness's "
        "overhead on it); the median itself when there is no witness.")
    baseline_us: float = Field(
        description="The baseline's, by the same rule on the CPU development device; on a GPU its median "
        "(timed by the judge itself).")
    raised: bool = Field(default=False, description="The witness, not the child's median, set kernel_us.")


# ---------------------------------------------------------------- profile and evidence


class WarpStall(_Model):
    reason: str
    percent: float


class KernelProfile(_Model):
    name: str
    launch_id: int | None = Field(default=None, description="ncu's ID of the kernel (launch order).")
    duration_us: float | None = None
    sm_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    registers_per_thread: int | None = None
    shared_memory_bytes: int | None = None
    grid: str | None = None
    block: str | None = None
    top_stalls: list[WarpStall] = Field(default_factory=list)
    executed_instructions: dict[str, int] = Field(
        default_factory=dict, description="Executed instruction counts per opcode family (dynamic evidence)."
    )


class ProfileReport(_Model):
    available: bool
    reason: str | None = Field(default=None, description="Why no profile exists, when it does not.")
    tool: str | None = Field(default=None, description="e.g. 'ncu 2025.3.1 --clock-control none'.")
    kernels: list[KernelProfile] = Field(default_factory=list)
    artifact: str | None = Field(default=None, description="File name of the raw .ncu-rep in the artifacts.")


class FeatureEvidence(_Model):
    """Which architecture features a PTX/CUDA submission uses, and how we know."""

    arch: str = Field(description="Target, e.g. sm_90a.")
    ptx_families: dict[str, int] = Field(
        default_factory=dict, description="Instruction family -> count in PTX."
    )
    sass_families: dict[str, int] = Field(default_factory=dict, description="SASS opcode family -> count.")
    executed_families: dict[str, int] | None = Field(
        default=None, description="Executed counts from ncu (null when no profiler ran)."
    )
    required: list[str] = Field(default_factory=list, description="Features the problem requires here.")
    missing: list[str] = Field(default_factory=list, description="Required features not evidenced.")
    evidence_level: Literal["static", "executed"] = "static"
    registers: int | None = None
    spill_bytes: int | None = None
    shared_memory_bytes: int | None = None


# ---------------------------------------------------------------- per shape and whole report


class ShapeReport(_Model):
    shape_id: str = Field(description="Stable id of the shape within the problem, e.g. 'm4096_n4096_k4096'.")
    axes: dict[str, int]
    ranked: bool = Field(description="Whether this shape counts towards the problem score.")
    status: Status
    message: str = ""
    checks: list[CorrectnessCheck] = Field(default_factory=list)
    timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    sol: SolFigures | None = None
    telemetry_before: Telemetry | None = None
    telemetry_after: Telemetry | None = None
    profile: ProfileReport | None = None
    witness: Witness | None = Field(
        default=None, description="Independent confirmation of the ranked median (ranked mode, PASSED)."
    )
    ranked_time: RankedTime | None = Field(
        default=None, description="The times the score and the rankings use (PASSED shapes with a timing).")
    wall_seconds: float = 0.0

    @model_validator(mode="after")
    def _performance_only_when_passed(self) -> ShapeReport:
        # A REJECTED shape keeps its claimed timing and witness ("timing not confirmed", "faster
        # than light"): the report shows both figures. Its SOL figures explain a faster-than-light
        # rejection. Nothing of it ranks.
        if self.status not in (Status.PASSED, Status.REJECTED) and (self.timing or self.sol or self.witness
                                                                      or self.ranked_time):
            raise ValueError("performance data exists only on a PASSED (or REJECTED) shape")
        return self


class DeviceInfo(_Model):
    kind: Device
    name: str = Field(description="e.g. 'NVIDIA H200' or the CPU model.")
    gpu_type: str = Field(description="Catalogue key: h100, h200, b200, cpu, or 'unknown:<name>'.")
    development_device: bool = Field(description="True on the CPU development device: wall-clock, no SOL.")
    sm_count: int | None = None
    l2_bytes: int | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda_runtime: str | None = None
    torch_version: str | None = None
    peaks_estimated: bool = Field(
        default=False, description="Peaks derived from NVML facts, not a datasheet."
    )


class EvaluationReport(_Model):
    schema_version: int = REPORT_SCHEMA_VERSION
    harness_version: str
    problem: str
    problem_version: int
    language: Language
    mode: Mode
    world_size: int = Field(
        default=1,
        description="Ranks (one process and one GPU each) the problem ran on; 1 for a single-GPU problem.",
    )
    device: DeviceInfo
    status: Status = Field(description="Worst shape status, or a whole-submission failure.")
    message: str = ""
    shapes: list[ShapeReport] = Field(default_factory=list)
    problem_score: float | None = Field(
        default=None, description="Geometric mean of S over ranked shapes; null unless rank-eligible."
    )
    rank_eligible: bool = Field(
        default=False,
        description="Ranked mode, every ranked shape PASSED and witnessed, no flag on a ranked shape, "
        "real GPU (never the CPU device).",
    )
    witnessed: bool = Field(
        default=False,
        description="Every PASSED shape's ranked median was confirmed by its witness. Until then a "
        "result is provisional: shown, never ranked.",
    )
    flags: list[str] = Field(
        default_factory=list,
        description="Reasons for review (faster than light, host work, ...): any flag keeps the "
        "evaluation out of the rankings.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="Informational remarks that do not affect ranking (throttling seen, the baseline's "
        "own timing remarks, launches that vary with ragged inputs, no CUPTI on this runner).",
    )
    evidence: FeatureEvidence | None = None
    sandbox: dict[str, str] = Field(
        default_factory=dict, description="What isolation actually applied on this run, and its gaps."
    )
    started_at: str = Field(description="ISO 8601 UTC.")
    finished_at: str
    wall_seconds: float
    phase_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Where the wall time went, by the parent's clock: start_up (interpreter, imports, "
        "device context, warm-up of the trusted paths; split in start_up.imports, start_up.device_init, "
        "start_up.warm_up by the child), compile (import of the submission), test, ranked, seal, profile.",
    )
    log: str = Field(default="", description="Submission's stdout/stderr, capped.")

    @property
    def verdict(self) -> str:
        return self.status.verdict
