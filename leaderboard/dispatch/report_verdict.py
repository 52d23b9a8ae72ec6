"""The site's own verdict on a runner's report: every figure it stores is recomputed here.

A report is a runner's claim. The site keeps the measurements (timing medians) and recomputes
everything derived from them with the evaluator's pure functions, from its own catalogue rows
(counts per shape, which shapes are ranked) and GPU type row (peaks): each shape's t_SOL, SOL
fraction, score, speedup, TFLOP/s and GB/s, the problem score and rank eligibility. It refuses
(status ``rejected``) a report whose numbers cannot be true: shapes the job did not ask for, a
PASSED report missing shapes, non-finite or non-positive times, a median below t_SOL ("faster
than light"), or a claimed score that is not the one the site computes (or outside [0, 1]).

Rank eligibility: ranked mode, passed, every counted shape passed and scored, every counted
shape's median confirmed by its witness (``witnessed``), no flag on a counted shape (flags read
``"<shape_id>: ..."``; one that names no shape counts against the whole report). Counted shapes
are the catalogue's ranked shapes on a GPU and the ``cpu`` shapes on the CPU development device,
whose score is the geometric mean of t_b / (t_b + t_k) (S with t_SOL = 0) and which is ranked
only among itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evaluator.gpu_specs import GpuSpec, GpuSpecError
from evaluator.problems import FLOP_CLASSES, CatalogueError, Counts, get_problem
from evaluator.report import EvaluationReport, RankedTime, ShapeReport, SolFigures
from evaluator.scoring import problem_score, ranked_time, shape_score, sol_figures, witnessed_time
from evaluator.vocabulary import CPU, CUDA, RANKED, Status, Verdict, worst_status
from leaderboard.models import Evaluation, GpuType, Shape

#: A claimed score may differ from the site's by float noise only (same functions, same inputs).
CLAIM_REL_TOLERANCE = 1e-6


class Refused(Exception):
    """The report cannot be true; the message says why (stored as the evaluation's message)."""


@dataclass
class Judgement:
    verdict: Verdict
    score: float | None = None
    rank_eligible: bool = False
    witnessed: bool = False
    figures: dict[str, SolFigures] = field(default_factory=dict)
    development_scores: dict[str, float] = field(default_factory=dict)
    #: Every timed passed shape's ranked times, computed here from its measurements.
    ranked: dict[str, RankedTime] = field(default_factory=dict)


def spec_of(gpu_type: GpuType) -> GpuSpec:
    """The GPU type row as the evaluator's GpuSpec (peaks as synced from gpus.toml)."""
    link = gpu_type.link_bytes_per_s_per_direction
    return GpuSpec(key=gpu_type.key, name=gpu_type.name, arch=gpu_type.arch or "",
                   peaks_tflops={name: float(value) for name, value in (gpu_type.peaks or {}).items()},
                   hbm_tbps=gpu_type.hbm_bytes_per_s / 1e12 if gpu_type.hbm_bytes_per_s else None,
                   nvlink_gbps_per_direction=link / 1e9 if link else None,
                   development_device=gpu_type.development_device)


def counts_of(shape: Shape) -> Counts:
    stored = shape.counts or {}
    return Counts(flops={name: float(value) for name, value in stored.get("flops", {}).items()},
                  bytes=float(stored.get("bytes", 0.0)), comm_bytes=float(stored.get("comm_bytes", 0.0)),
                  estimated=bool(stored.get("estimated", False)))


def judge(evaluation: Evaluation, report: EvaluationReport, shapes: dict[str, Shape]) -> Judgement:
    """The site's verdict, score and eligibility for ``report``; raises Refused."""
    development = evaluation.gpu_type.development_device
    check_shapes_asked(evaluation, report)
    for item in report.shapes:
        check_times(item)
    judgement = Judgement(verdict=worst_status([report.status, *(s.status for s in report.shapes)]).verdict)
    judgement.ranked = ranked_times(report)
    if development:
        judgement.development_scores = {s.shape_id: score for s in report.shapes
                                        if (score := development_score(s, judgement.ranked)) is not None}
    else:
        judgement.figures = recompute_figures(evaluation, report, shapes, judgement.ranked)
    counted = counted_shape_ids(shapes, development)
    judgement.score = problem_score_of(report, counted, judgement.figures, judgement.development_scores)
    check_claims(report, judgement)
    judgement.witnessed = witnessed(report, counted)
    judgement.rank_eligible = eligible(report, counted, judgement)
    return judgement


def counted_shape_ids(shapes: dict[str, Shape], development: bool) -> set[str]:
    return {shape_id for shape_id, shape in shapes.items()
            if shape.active and (shape.cpu if development else shape.ranked)}


def check_shapes_asked(evaluation: Evaluation, report: EvaluationReport) -> None:
    device = CPU if evaluation.gpu_type.development_device else CUDA
    try:
        asked = [
            s.shape_id for s in get_problem(report.problem).select_shapes(evaluation.shape_selection, device)
        ]
    except CatalogueError as error:
        raise Refused(f"the site cannot tell which shapes the job asked for: {error}") from None
    reported = [item.shape_id for item in report.shapes]
    if len(set(reported)) != len(reported) or not set(reported) <= set(asked):
        raise Refused(f"the report lists shapes {reported}; the job asked for {asked}")
    if report.status is Status.PASSED and len(reported) != len(asked):
        raise Refused(
            f"the report says PASSED but covers {len(reported)} of the {len(asked)} shapes asked for"
        )


def _positive(value: float | None, what: str) -> None:
    if value is None or not math.isfinite(value) or value <= 0:
        raise Refused(f"{what} = {value} is not a positive finite time")


def check_times(item: ShapeReport) -> None:
    """Every time the site stores or scores with must be a positive finite number of microseconds."""
    for label, timing in (("median", item.timing), ("baseline median", item.baseline_timing)):
        if timing is None:
            continue
        for name in ("median_us", "mean_us", "min_us", "max_us"):
            _positive(getattr(timing, name), f"{item.shape_id}: {label} timing {name}")
        if not (math.isfinite(timing.std_us) and timing.std_us >= 0):
            raise Refused(f"{item.shape_id}: {label} timing std_us = {timing.std_us} is not a finite spread")
    # The judge's clock may see ~0 us for a tiny call, and a witness's floor may be below 0.
    witness = item.witness
    if witness is not None and not (math.isfinite(witness.median_us) and witness.median_us >= 0
                                    and math.isfinite(witness.floor_us)):
        raise Refused(f"{item.shape_id}: witness median_us = {witness.median_us}, floor_us = "
                      f"{witness.floor_us} are not finite times")
    for name in ("overhead_us", "baseline_us"):
        value = getattr(witness, name, None) if witness is not None else None
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise Refused(f"{item.shape_id}: witness {name} = {value} is not a finite time")
    if witness is not None and witness.calls_us:
        check_witnessed_calls(item.shape_id, witness.median_us, witness.calls_us, witness.warmup_calls)


def check_witnessed_calls(shape_id: str, median_us: float, calls_us: list[float], warmup: int = 0) -> None:
    """The witness's per-call times are finite and its median is theirs (``witnessed_time``, the
    evaluator's rule): a report whose figures disagree was not made by the evaluator."""
    if not all(math.isfinite(value) and value >= 0 for value in calls_us):
        raise Refused(f"{shape_id}: witnessed call times {calls_us[:4]} are not finite times")
    if not 0 <= warmup < max(len(calls_us), 1):
        raise Refused(f"{shape_id}: {warmup} warm-up calls of {len(calls_us)} witnessed calls")
    expected = witnessed_time(calls_us, warmup)
    if not math.isclose(median_us, expected, rel_tol=1e-9, abs_tol=1e-9):
        raise Refused(
            f"{shape_id}: witness median_us = {median_us} is not the median of its calls ({expected})"
        )


def ranked_times(report: EvaluationReport) -> dict[str, RankedTime]:
    """The ranked times of every passed, timed shape, by the evaluator's rule (``scoring.ranked_time``)
    from the report's measurements: the claim, its witness, the baseline. A report that claims others
    was not made by the evaluator."""
    ranked = {}
    for item in report.shapes:
        if item.status is not Status.PASSED or (mine := ranked_time(item)) is None:
            continue
        claimed = item.ranked_time
        if claimed is not None and not (_same(claimed.kernel_us, mine.kernel_us)
                                        and _same(claimed.baseline_us, mine.baseline_us)):
            raise Refused(f"{item.shape_id}: the report ranks {claimed.kernel_us:g} us against a baseline of "
                          f"{claimed.baseline_us:g} us; its measurements give {mine.kernel_us:g} and "
                          f"{mine.baseline_us:g} us")
        ranked[item.shape_id] = mine
    return ranked


def recompute_figures(evaluation: Evaluation, report: EvaluationReport, shapes: dict[str, Shape],
                      ranked: dict[str, RankedTime]) -> dict[str, SolFigures]:
    """SOL figures of every passed, timed shape from the site's counts and peaks and its ranked
    times; refuses a median below t_SOL whatever the report says."""
    spec, figures = spec_of(evaluation.gpu_type), {}
    world_size = evaluation.submission.problem.world_size
    ceilings = runner_ceilings(evaluation.runner.calibration if evaluation.runner else None)
    for item in report.shapes:
        times = ranked.get(item.shape_id)
        if times is None or item.timing is None:
            continue
        try:
            figure = sol_figures(counts_of(shapes[item.shape_id]), spec, times.kernel_us * 1e-6,
                                 times.baseline_us * 1e-6, ceilings, world_size=world_size)
        except GpuSpecError:  # this GPU has no peak for the problem's work: no SOL, no score
            continue
        if not figure.counts_estimated and (
            figure.faster_than_light or item.timing.median_us < figure.t_sol_us
        ):
            raise Refused(f"faster than light: {item.shape_id} median {item.timing.median_us:g} us is below "
                          f"t_SOL {figure.t_sol_us:g} us on {spec.key}")
        figures[item.shape_id] = figure
    return figures


#: The calibration keys the site uses from a runner's heartbeat (``ceilings.<key>``, runners/calibration.py).
CEILING_KEYS = frozenset({f"{flop_class}_tflops" for flop_class in FLOP_CLASSES} | {"hbm_tbps",
                                                                                   "nvlink_gbps_per_direction"})


def runner_ceilings(calibration: dict[str, object] | None) -> dict[str, float] | None:
    """The attainable ceilings an authenticated runner measured (GEMM, copy, an x<n> slot's bus
    bandwidth), as its last heartbeat gave them. They set only ``sol_fraction_attainable``, shown
    beside the datasheet fraction; the score and the faster-than-light check use the datasheet."""
    ceilings = {}
    for name, value in (calibration or {}).items():
        key = name.removeprefix("ceilings.")
        if key in CEILING_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value) and value > 0:
            ceilings[key] = float(value)
    return ceilings or None


def development_score(item: ShapeReport, ranked: dict[str, RankedTime]) -> float | None:
    """The score S with t_SOL = 0 on the CPU development device (= t_b / (t_b + t_k); 0.5 = the
    baseline) of the ranked times: the evaluator's one scoring function, as for every GPU score."""
    times = ranked.get(item.shape_id)
    if item.status is not Status.PASSED or times is None:
        return None
    return shape_score(times.kernel_us * 1e-6, times.baseline_us * 1e-6, 0.0)


def problem_score_of(report: EvaluationReport, counted: set[str], figures: dict[str, SolFigures],
                     development_scores: dict[str, float]) -> float | None:
    """Geometric mean of the counted shapes' scores; None unless every counted shape has one."""
    if report.mode != RANKED or not counted:
        return None
    scores = {**{shape_id: figure.score for shape_id, figure in figures.items()}, **development_scores}
    if not counted <= set(scores):
        return None
    return problem_score([scores[shape_id] for shape_id in sorted(counted)])


def _same(claimed: float, computed: float) -> bool:
    return math.isclose(claimed, computed, rel_tol=CLAIM_REL_TOLERANCE, abs_tol=1e-12)


def check_claims(report: EvaluationReport, judgement: Judgement) -> None:
    """A score the report claims must be in [0, 1] and the one the site computes."""
    claimed = report.problem_score
    if claimed is not None:
        if not (math.isfinite(claimed) and 0.0 <= claimed <= 1.0):
            raise Refused(f"the report claims a problem score of {claimed}, outside [0, 1]")
        if judgement.score is None or not _same(claimed, judgement.score):
            raise Refused(
                f"the report claims a problem score of {claimed:g}; the site computes "
                f"{'none' if judgement.score is None else format(judgement.score, 'g')} from its timings"
            )
    for item in report.shapes:
        if item.sol is None:
            continue
        mine = judgement.figures.get(item.shape_id)
        if (
            mine is None
            or not _same(item.sol.score, mine.score)
            or not _same(item.sol.t_sol_us, mine.t_sol_us)
        ):
            raise Refused(f"{item.shape_id}: the report claims score {item.sol.score:g} at t_SOL "
                          f"{item.sol.t_sol_us:g} us; the site computes "
                          + ("none" if mine is None else f"{mine.score:g} at {mine.t_sol_us:g} us"))


def witnessed(report: EvaluationReport, counted: set[str]) -> bool:
    """The report says so, and every counted shape that passed has a confirming witness whose
    floor its median does not undercut."""
    if not report.witnessed:
        return False
    for item in report.shapes:
        if item.shape_id not in counted or item.status is not Status.PASSED:
            continue
        witness, timing = item.witness, item.timing
        if witness is None or timing is None or not witness.confirmed or timing.median_us < witness.floor_us:
            return False
    return True


def flag_costs_ranking(flag: str, counted: set[str], reported: set[str]) -> bool:
    """A flag on an uncounted shape does not cost the ranking; any other flag does."""
    shape_id, separator, _ = flag.partition(": ")
    return not (separator and shape_id in reported and shape_id not in counted)


def eligible(report: EvaluationReport, counted: set[str], judgement: Judgement) -> bool:
    if report.mode != RANKED or judgement.verdict is not Verdict.PASSED or judgement.score is None:
        return False
    if not judgement.witnessed:
        return False
    reported = {item.shape_id for item in report.shapes}
    return not any(flag_costs_ranking(flag, counted, reported) for flag in report.flags)
