"""Scores: pure functions of a few numbers (docs/scoring.md). No torch."""

from __future__ import annotations

import math
import statistics

from evaluator.gpu_specs import GpuSpec
from evaluator.problems import Counts
from evaluator.report import RankedTime, ShapeReport, SolFigures
from evaluator.sol import t_sol, t_sol_attainable

#: Lowest per-shape score that enters the geometric mean. One shape that scores (near) zero must
#: lower the problem score, not turn it into 0, -inf or NaN (class 12).
SCORE_FLOOR = 1e-6


def shape_score(t_k: float, t_b: float, t_sol_s: float) -> float:
    """S = 1 / (1 + (t_k - t_SOL) / (t_b - t_SOL)): 0.5 at the baseline, 1 at the speed of light.

    When the baseline is already at (or below) t_SOL the ratio is undefined: S = 1 if the kernel
    reaches t_SOL too, else 0. A kernel faster than light would score above 1; it is capped at 1
    here and flagged elsewhere (``faster_than_light``), never ranked.
    """
    if not (t_k > 0 and t_b > 0 and t_sol_s >= 0):
        raise ValueError(f"times must be positive: t_k={t_k}, t_b={t_b}, t_sol={t_sol_s}")
    if t_b <= t_sol_s:
        return 1.0 if t_k <= t_sol_s else 0.0
    if t_k <= t_sol_s:
        return 1.0
    return 1.0 / (1.0 + (t_k - t_sol_s) / (t_b - t_sol_s))


def geometric_mean(values: list[float]) -> float:
    """The geometric mean of positive values, in log space (no overflow or underflow on the way)."""
    if not values or any(not value > 0 for value in values):
        raise ValueError(f"a geometric mean needs positive values, not {values}")
    return math.exp(sum(math.log(value) for value in values) / len(values))


def problem_score(scores: list[float], floor: float = SCORE_FLOOR) -> float:
    """Geometric mean of per-shape scores, in log space, each score floored at ``floor``."""
    if not scores:
        raise ValueError("a problem score needs at least one shape score")
    if any(math.isnan(score) for score in scores):
        raise ValueError(f"NaN among shape scores {scores}")
    return geometric_mean([max(score, floor) for score in scores])


def sol_figures(
    counts: Counts,
    spec: GpuSpec,
    t_kernel_s: float,
    t_baseline_s: float,
    calibration: dict[str, float] | None = None,
    world_size: int = 1,
) -> SolFigures:
    """Every SOL figure of one passed shape: t_SOL, fractions, score, speedup, TFLOP/s, GB/s."""
    bound = t_sol(counts, spec, world_size)
    score = shape_score(t_kernel_s, t_baseline_s, bound.t_sol_s)  # validates the times first
    attainable = t_sol_attainable(counts, spec, calibration, world_size) if calibration else None
    sol_fraction = bound.t_sol_s / t_kernel_s
    return SolFigures(
        flops=dict(counts.flops),
        bytes=counts.bytes,
        comm_bytes=counts.comm_bytes,
        t_sol_us=bound.t_sol_us,
        bound=bound.bound,
        t_sol_attainable_us=attainable.t_sol_us if attainable else None,
        sol_fraction=sol_fraction,
        sol_fraction_attainable=attainable.t_sol_s / t_kernel_s if attainable else None,
        score=score,
        speedup=t_baseline_s / t_kernel_s,
        tflops=counts.total_flops / t_kernel_s / 1e12,
        gbps=counts.bytes / t_kernel_s / 1e9,
        faster_than_light=sol_fraction > 1.0 and not counts.estimated,
        counts_estimated=counts.estimated,
    )


def witnessed_time(times: list[float], warmup: int = 0) -> float:
    """A shape's GPU witness from its witnessed calls' times: the first ``warmup`` calls left out
    (their one-off work, an autotune or a lazy set-up, is never what is measured), then the lower
    median of the rest: of three, the median; of two, the lower. Lower, never higher: a witness above
    the kernel's steady cost would reject an honest claim, and one below it only loosens the floor by
    the calls' spread. Here, beside the scores, because the site checks a report's witness by the
    same rule."""
    measured = times[warmup:] if len(times) > warmup else times
    return float(statistics.median_low(measured))


# ---------------------------------------------------------------- the ranked figure

#: What ncu's kernel durations may exceed the child's timing by, per kernel the call ran, before the
#: excess counts against the claim: the smallest per-kernel offset Nsight Compute showed over the
#: child's CUPTI timestamps on the H200 (0.53-0.57 us for a one-kernel vector add of 2^24 floats;
#: 0.9-1.4 us on shorter kernels), so a claim rewritten downwards is ranked no lower than its
#: kernels' own time (docs/security.md, "The ranked figure").
WITNESS_PER_KERNEL_US = 0.5
#: Calls shorter than this get more per kernel (ncu's offset is 1-2 us on kernels of a few us,
#: where the 1% bound does not apply), fading to nothing at this length.
WITNESS_SHORT_CALL_US = 20.0
WITNESS_SHORT_EXTRA_US = 1.0


def witness_allowance_us(witness_us: float, kernels: int) -> float:
    """How far below ncu's time of a call (``witness_us``, ``kernels`` kernels) its ranked figure may
    be: WITNESS_PER_KERNEL_US a kernel, plus up to WITNESS_SHORT_EXTRA_US a kernel on calls under
    WITNESS_SHORT_CALL_US."""
    short = max(0.0, 1.0 - witness_us / WITNESS_SHORT_CALL_US)
    return max(kernels, 0) * (WITNESS_PER_KERNEL_US + WITNESS_SHORT_EXTRA_US * short)


def ranked_gpu_us(claim_us: float, witness_us: float, kernels: int) -> float:
    """A GPU shape's ranked time: the child's median, or ncu's time of the call less its allowance
    when that is larger. A claim rewritten downwards is ranked on what ncu measured."""
    return max(claim_us, witness_us - witness_allowance_us(witness_us, kernels))


def ranked_cpu_us(claim_us: float, judge_us: float, overhead_us: float) -> float:
    """A CPU development device time (the kernel's or the baseline's, by the same rule): the child's
    median, or the judge's own clock of its checked calls less the harness's overhead on that clock
    (measured on the trusted baseline, before the submission was imported) when that is larger."""
    return max(claim_us, judge_us - max(overhead_us, 0.0))


def ranked_time(shape: ShapeReport) -> RankedTime | None:
    """The times ``shape`` is scored and ranked on, from its measurements alone (the evaluator and
    the site both compute them here, so the site never takes a runner's ranked figure on trust)."""
    timing, baseline, witness = shape.timing, shape.baseline_timing, shape.witness
    if timing is None or baseline is None:
        return None
    kernel_us, baseline_us = timing.median_us, baseline.median_us
    if witness is not None and witness.source == "ncu":
        kernel_us = ranked_gpu_us(kernel_us, witness.median_us, witness.kernels_per_call)
    elif witness is not None and witness.source == "judge_wall" and witness.overhead_us is not None:
        kernel_us = ranked_cpu_us(kernel_us, witness.median_us, witness.overhead_us)
        if witness.baseline_us is not None:
            baseline_us = ranked_cpu_us(baseline_us, witness.baseline_us, witness.overhead_us)
    return RankedTime(kernel_us=kernel_us, baseline_us=baseline_us, raised=kernel_us > timing.median_us)
