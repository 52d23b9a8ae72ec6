"""Scores: pure functions of a few numbers (docs/scoring.md). No torch."""

from __future__ import annotations

import math
import statistics

from evaluator.gpus import GpuSpec
from evaluator.problems import Counts
from evaluator.report import SolFigures
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


def problem_score(scores: list[float], floor: float = SCORE_FLOOR) -> float:
    """Geometric mean of per-shape scores, in log space, each score floored at ``floor``."""
    if not scores:
        raise ValueError("a problem score needs at least one shape score")
    if any(math.isnan(score) for score in scores):
        raise ValueError(f"NaN among shape scores {scores}")
    logs = [math.log(max(score, floor)) for score in scores]
    return math.exp(sum(logs) / len(logs))


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
        faster_than_light=sol_fraction > 1.0,
    )


def witnessed_time(times: list[float]) -> float:
    """A shape's GPU witness from its witnessed calls' times: the median of three; of two, the lower
    (a one-off first call dropped either way). Lower, never higher: a witness above the kernel's
    steady cost would reject an honest claim, and one below it only loosens the floor by the calls'
    spread. Here, beside the scores, because the site checks a report's witness by the same rule."""
    return float(statistics.median_low(times))
