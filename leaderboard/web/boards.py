"""The problem page's rankings, read side: rows with speedup, SOL fraction and the gap to the row
above, the baseline as a reference row, the measured reference lines (leaderboard/reference_lines.py)
as labelled rows that take no rank, one board per shape, and the provisional results.

Every board is a fixed number of queries whatever its length (tests/leaderboard/test_web_queries.py counts
them): the ranking rows (one indexed query, ``leaderboard.ranking_maintenance``), then one query for the
per-shape figures of every row shown.

Every board shows one catalogue version of the problem (``version``; default the current one): each
version ranks apart (``leaderboard.models.RankingEntry``).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from evaluator.scoring import geometric_mean, problem_score
from evaluator.vocabulary import Status
from leaderboard.models import (
    REFERENCE_USER,
    Evaluation,
    EvaluationStatus,
    GpuType,
    Mode,
    Problem,
    RankingEntry,
    RankingTrack,
    Shape,
    ShapeResult,
)
from leaderboard.ranking_maintenance import ranking_rows
from leaderboard.reference_lines import LineRow, line_rows
from leaderboard.web.agents import agents_of
from leaderboard.web.sol import shape_sol

#: Per-shape boards on the problem page show this many rows each.
SHAPE_BOARD_ROWS = 10
PROVISIONAL_ROWS = 10


@dataclass
class BoardRow:
    """One line of a ranking: a ranked entry (``rank`` set), the baseline's reference row, or a
    measured reference line (``label``: eager, torch_compile, liger...; never a rank)."""

    kind: str  # "ranked", "baseline" or "reference"
    score: float | None
    rank: int | None = None
    user: str = ""
    submission_id: int | None = None
    median_us: float | None = None
    speedup: float | None = None
    sol_fraction: float | None = None
    gap: float | None = None
    submitted_at: datetime | None = None
    features_met: bool | None = None
    agent: str = ""  # the program that submitted it, when its API token named one
    label: str = ""  # a reference line's


@dataclass
class Board:
    gpu: GpuType
    shape: Shape | None
    rows: list[BoardRow] = field(default_factory=list)
    t_sol_us: float | None = None
    baseline_us: float | None = None

    @property
    def ranked_count(self) -> int:
        return sum(1 for row in self.rows if row.kind == "ranked")


@dataclass(frozen=True)
class ShapeFigures:
    shape_id: int
    median_us: float | None
    speedup: float | None
    sol_fraction: float | None
    baseline_us: float | None
    score: float | None


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of per-shape figures (speedups, SOL fractions: ``scoring.geometric_mean``);
    None when any is missing or not positive (a partial mean misleads)."""
    items = list(values)
    if not items or any(value is None or not value > 0 for value in items):
        return None
    return geometric_mean([value for value in items if value is not None])


def board_shapes(problem: Problem, gpu: GpuType, version: int | None = None) -> list[Shape]:
    """The shapes a score is made of here: ranked shapes on a GPU, the ``cpu`` shapes on the CPU.

    An older ``version``'s: the shapes its per-shape rankings hold here (the catalogue keeps only
    the current version's flags; a shape the new version dropped is kept, inactive, while results
    point at it)."""
    if version is not None and version != problem.version:
        ranked = set(RankingEntry.objects.filter(problem=problem, problem_version=version, gpu_type=gpu,
                                                 shape__isnull=False).values_list("shape_id", flat=True))
        return [shape for shape in problem.shapes.all() if shape.pk in ranked]
    wanted = {"cpu": True} if gpu.development_device else {"ranked": True}
    return [shape for shape in problem.shapes.all() if shape.active and all(
        getattr(shape, name) == value for name, value in wanted.items())]


def shape_figures(evaluation_ids: Iterable[int]) -> dict[int, list[ShapeFigures]]:
    """Passed per-shape results of these evaluations, in one query."""
    rows = ShapeResult.objects.filter(
        evaluation_id__in=list(evaluation_ids), status=Status.PASSED
    ).values_list(
        "evaluation_id", "shape_id", "median_us", "speedup", "sol_fraction", "baseline_median_us", "score"
    )
    figures: dict[int, list[ShapeFigures]] = defaultdict(list)
    for evaluation_id, *values in rows:
        figures[evaluation_id].append(ShapeFigures(*values))
    return figures


def baseline_times(figures: dict[int, list[ShapeFigures]]) -> dict[int, float]:
    """Per shape, the median of the baseline times measured in the jobs shown (each job times the
    baseline beside the kernel, on the same GPU)."""
    times: dict[int, list[float]] = defaultdict(list)
    for items in figures.values():
        for item in items:
            if item.baseline_us:
                times[item.shape_id].append(item.baseline_us)
    return {shape_id: statistics.median(values) for shape_id, values in times.items()}


def problem_board(problem: Problem, gpu: GpuType, require_features: bool = False, limit: int = 100,
                  version: int | None = None, lines: list[LineRow] | None = None) -> Board:
    """The whole-problem ranking of one GPU type (by score), with the baseline row placed by S = 0.5
    and the measured reference lines by their scores (``lines``: read here when not given)."""
    entries = ranking_rows(problem, gpu, None, limit, require_features, version)
    figures = shape_figures(entry.evaluation_id for entry in entries)
    shapes = board_shapes(problem, gpu, version)
    ids = {shape.pk for shape in shapes}
    agents = agents_of(entry.submission_id for entry in entries)
    rows = [_problem_row(entry, [f for f in figures.get(entry.evaluation_id, []) if f.shape_id in ids],
                         agents.get(entry.submission_id, ""))
            for entry in entries]
    baseline = baseline_times(figures)
    sol = {shape.pk: shape_sol(problem, shape, gpu).t_sol_us for shape in shapes}
    fractions = [_fraction(sol.get(pk), baseline.get(pk)) for pk in ids]
    reference = BoardRow(
        kind="baseline", score=0.5, speedup=1.0, sol_fraction=geomean(fractions) if ids else None
    )
    rows = _insert(rows, reference, key=lambda row: -(row.score or 0.0))
    for line in _reference_rows(line_rows(problem, gpu, version, ids) if lines is None else lines):
        rows = _insert(rows, line, key=lambda row: -(row.score or 0.0))
    return Board(gpu, None, _with_gaps(rows))


def _reference_rows(lines: list[LineRow]) -> list[BoardRow]:
    """The measured reference lines as rows of the whole-problem board (placed by score, no rank)."""
    return [BoardRow(kind="reference", score=line.score, user=line.title, label=line.label,
                     submission_id=line.submission_id, speedup=line.speedup, sol_fraction=line.sol_fraction)
            for line in lines if line.status == "measured" and line.score is not None]


def _problem_row(entry: RankingEntry, figures: list[ShapeFigures], agent: str) -> BoardRow:
    return BoardRow(
        kind="ranked", rank=entry.rank, score=entry.score, user=entry.user.username,  # type: ignore[attr-defined]
        submission_id=entry.submission_id, submitted_at=entry.submitted_at, features_met=entry.features_met,
        agent=agent,
        speedup=geomean(f.speedup for f in figures), sol_fraction=geomean(f.sol_fraction for f in figures),
    )


def _fraction(t_sol_us: float | None, baseline_us: float | None) -> float | None:
    return t_sol_us / baseline_us if t_sol_us and baseline_us else None


def _insert(rows: list[BoardRow], reference: BoardRow, key: Any) -> list[BoardRow]:
    """The reference row goes after every row at least as good as it (ties: entries first)."""
    position = sum(1 for row in rows if key(row) <= key(reference))
    return [*rows[:position], reference, *rows[position:]]


def _with_gaps(rows: list[BoardRow]) -> list[BoardRow]:
    """Gap to the ranked entry above: score lost (whole problem) or microseconds added (a shape)."""
    above: BoardRow | None = None
    for row in rows:
        if row.kind != "ranked":
            continue
        if above is not None:
            row.gap = (
                row.median_us - above.median_us
                if row.median_us is not None and above.median_us is not None
                else (above.score or 0.0) - (row.score or 0.0)
            )
        above = row
    return rows


def shape_boards(problem: Problem, gpu: GpuType, require_features: bool = False,
                 per_shape: int = SHAPE_BOARD_ROWS, version: int | None = None,
                 lines: list[LineRow] | None = None) -> list[Board]:
    """The top rows of every shape's ranking (by median time): two queries for all shapes (and the
    reference lines', when ``lines`` are not given)."""
    shapes = board_shapes(problem, gpu, version)
    track = RankingTrack.FEATURES if require_features else RankingTrack.ALL
    entries = list(
        RankingEntry.objects.filter(problem=problem, problem_version=version or problem.version, gpu_type=gpu,
                                    track=track, shape__in=shapes)
        .annotate(position=Window(RowNumber(), partition_by=[F("shape_id")],
                                  order_by=[F("median_us").asc(), F("submitted_at").asc(), F("id").asc()]))
        .filter(position__lte=per_shape).select_related("user").order_by("shape_id", "position")
    )
    figures = shape_figures(entry.evaluation_id for entry in entries)
    agents = agents_of(entry.submission_id for entry in entries)
    by_shape: dict[int, list[RankingEntry]] = defaultdict(list)
    for entry in entries:
        by_shape[entry.shape_id].append(entry)  # type: ignore[index]
    measured = [line for line in (line_rows(problem, gpu, version) if lines is None else lines)
                if line.status == "measured"]
    return [_shape_board(problem, gpu, shape, by_shape.get(shape.pk, []), figures, agents, measured)
            for shape in shapes]


def _shape_board(
    problem: Problem,
    gpu: GpuType,
    shape: Shape,
    entries: list[RankingEntry],
    figures: dict[int, list[ShapeFigures]],
    agents: dict[int, str],
    lines: list[LineRow],
) -> Board:
    t_sol_us = shape_sol(problem, shape, gpu).t_sol_us
    rows = []
    for entry in entries:
        mine = next((f for f in figures.get(entry.evaluation_id, []) if f.shape_id == shape.pk), None)
        rows.append(BoardRow(
            kind="ranked", rank=entry.position, score=entry.score, median_us=entry.median_us,  # type: ignore[attr-defined]
            user=entry.user.username, submission_id=entry.submission_id, submitted_at=entry.submitted_at,
            features_met=entry.features_met, speedup=mine.speedup if mine else None,
            sol_fraction=mine.sol_fraction if mine else None, agent=agents.get(entry.submission_id, ""),
        ))
    baseline_us = baseline_times({0: [f for items in figures.values() for f in items]}).get(shape.pk)
    board = Board(gpu, shape, rows, t_sol_us=t_sol_us, baseline_us=baseline_us)
    if baseline_us is not None:
        reference = BoardRow(kind="baseline", score=0.5, median_us=baseline_us, speedup=1.0,
                             sol_fraction=_fraction(t_sol_us, baseline_us))
        board.rows = _insert(rows, reference, key=lambda row: row.median_us or math.inf)
    for line in lines:
        figures_here = line.at(shape.pk)
        if figures_here is not None and figures_here.median_us is not None:
            row = BoardRow(kind="reference", score=figures_here.score, median_us=figures_here.median_us,
                           user=line.title, label=line.label, submission_id=line.submission_id,
                           speedup=figures_here.speedup, sol_fraction=figures_here.sol_fraction)
            board.rows = _insert(board.rows, row, key=lambda row: row.median_us or math.inf)
    board.rows = _with_gaps(board.rows)
    return board


@dataclass
class ProvisionalRow:
    evaluation: Evaluation
    score: float | None  # the evaluator's figures, not yet confirmed by a witness
    agent: str = ""


def provisional_rows(problem: Problem, gpu: GpuType, limit: int = PROVISIONAL_ROWS,
                     version: int | None = None) -> list[ProvisionalRow]:
    """Passed ranked results whose timing no witness has confirmed yet: shown, never ranked.

    A flagged or withdrawn result is not provisional (see the integrity log); neither is a
    rank-eligible one (it is on the board)."""
    evaluations = list(
        Evaluation.objects.filter(
            submission__problem=problem,
            submission__problem_version=version or problem.version,
            gpu_type=gpu,
            mode=Mode.RANKED,
            status=EvaluationStatus.PASSED,
            rank_eligible=False,
            withdrawal__isnull=True,
        )
        .exclude(submission__user__username=REFERENCE_USER)  # reference lines have their own rows
        .select_related("submission__user")
        .defer("report", "log", "submission__source")
        .order_by("-finished_at", "-id")[: limit * 3]
    )
    unflagged = [evaluation for evaluation in evaluations if not evaluation.flags][:limit]
    ids = {shape.pk for shape in board_shapes(problem, gpu, version)}
    figures = shape_figures(evaluation.pk for evaluation in unflagged)
    agents = agents_of(evaluation.submission_id for evaluation in unflagged)
    return [ProvisionalRow(evaluation, _provisional_score(evaluation, figures, ids),
                           agents.get(evaluation.submission_id, "")) for evaluation in unflagged]


def _provisional_score(
    evaluation: Evaluation, figures: dict[int, list[ShapeFigures]], ids: set[int]
) -> float | None:
    """The stored score; else, when every shape of the score passed with one, the problem score the
    site computes from them (``scoring.problem_score``: the same floor on a shape that scored 0)."""
    if evaluation.score is not None:
        return evaluation.score
    mine = [f.score for f in figures.get(evaluation.pk, []) if f.shape_id in ids and f.score is not None]
    return problem_score(mine) if ids and len(mine) == len(ids) else None
