"""Ranking maintenance: each user's best rank-eligible result per (problem, GPU type[, shape]).

``refresh_rankings_for`` runs after an evaluation reaches a terminal status; it only ever
replaces a row with a strictly better result (a worse later result never displaces a better
earlier one; on equal figures the earlier submission stays). ``ranking_rows`` reads a ranking
with one indexed query, optionally filtered to results that meet the problem's required
architecture features (``require_features``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from leaderboard.models import (
    Evaluation,
    EvaluationStatus,
    GpuType,
    Mode,
    Problem,
    RankingEntry,
    Shape,
    ShapeResult,
)

PASSED_SHAPE_STATUS = "PASSED"


@dataclass(frozen=True)
class Candidate:
    score: float
    median_us: float | None
    submitted_at: datetime

    def beats(self, entry: RankingEntry) -> bool:
        """Strictly better than the stored row; ties keep the earlier submission."""
        if entry.shape_id is None:
            mine, theirs = -self.score, -entry.score  # higher score first
        else:
            mine, theirs = _time_key(self.median_us), _time_key(entry.median_us)
        if mine != theirs:
            return mine < theirs
        return self.submitted_at < entry.submitted_at


def _time_key(median_us: float | None) -> float:
    return float("inf") if median_us is None else median_us


def is_rank_eligible(evaluation: Evaluation) -> bool:
    """Ranked mode, passed, eligible by its report, scored.

    Development-device evaluations qualify too, but only for the ranking of their own GPU type
    (``cpu``, labelled as wall-clock and without SOL everywhere it is shown): rankings are keyed by
    GPU type, so they never mix into a GPU's ranking.
    """
    return (
        evaluation.mode == Mode.RANKED
        and evaluation.status == EvaluationStatus.PASSED
        and evaluation.rank_eligible
        and evaluation.score is not None
    )


def refresh_rankings_for(evaluation: Evaluation) -> int:
    """Enter an eligible evaluation into its rankings; returns how many rows it took over."""
    evaluation = Evaluation.objects.select_related("submission", "gpu_type").get(pk=evaluation.pk)
    if not is_rank_eligible(evaluation):
        return 0
    submitted_at = evaluation.submission.created_at
    assert evaluation.score is not None
    changed = int(_offer(evaluation, None, Candidate(evaluation.score, None, submitted_at)))
    for result in _passed_ranked_shape_results(evaluation):
        assert result.median_us is not None
        candidate = Candidate(result.score or 0.0, result.median_us, submitted_at)
        changed += int(_offer(evaluation, result.shape, candidate))
    return changed


def _passed_ranked_shape_results(evaluation: Evaluation) -> list[ShapeResult]:
    """The shapes a per-shape ranking exists for: the ranked shapes on a GPU, the small shapes
    flagged ``cpu`` (the only ones it runs) on the development device."""
    shapes = {"shape__cpu": True} if evaluation.gpu_type.development_device else {"shape__ranked": True}
    return list(
        evaluation.shape_results.filter(
            status=PASSED_SHAPE_STATUS, median_us__isnull=False, **shapes
        ).select_related("shape")
    )


def _offer(evaluation: Evaluation, shape: Shape | None, candidate: Candidate) -> bool:
    """Insert or improve the user's row; safe against concurrent site workers."""
    submission = evaluation.submission
    key = {"problem_id": submission.problem_id, "gpu_type_id": evaluation.gpu_type_id, "shape": shape,
           "user_id": submission.user_id}
    values = {"submission": submission, "evaluation": evaluation, "score": candidate.score,
              "median_us": candidate.median_us, "submitted_at": candidate.submitted_at,
              "features_met": evaluation.features_met}
    with transaction.atomic():
        entry = RankingEntry.objects.select_for_update().filter(**key).first()
        if entry is None:
            try:
                with transaction.atomic():
                    RankingEntry.objects.create(**key, **values)
                return True
            except IntegrityError:  # another worker inserted it first: compare with theirs
                entry = RankingEntry.objects.select_for_update().get(**key)
        if not candidate.beats(entry):
            return False
        for field, value in values.items():
            setattr(entry, field, value)
        entry.save()
        return True


def ranking_rows(
    problem: Problem, gpu_type: GpuType, shape: Shape | None = None, limit: int = 100,
    require_features: bool = False,
) -> list[RankingEntry]:
    """The ranking, best first, each row with ``rank`` (1-based) set.

    ``require_features``: only rows whose evidence shows every feature the problem requires on
    this GPU type's target (``features_met`` True). Where the problem requires nothing there,
    rows with nothing to judge (``features_met`` null) stay too; where it requires something, a
    row without evidence (a Python submission) is hidden: nothing shows it uses those features.
    """
    order: tuple[str, ...] = ("-score", "submitted_at") if shape is None else ("median_us", "submitted_at")
    rows_query = RankingEntry.objects.filter(problem=problem, gpu_type=gpu_type, shape=shape)
    if require_features:
        rows_query = rows_query.filter(features_filter(problem, gpu_type))
    rows = list(
        rows_query.select_related("user", "submission", "evaluation")
        .order_by(*order, "id")[:limit]
    )
    for position, row in enumerate(rows, start=1):
        row.rank = position  # type: ignore[attr-defined]
    return rows


def requires_features(problem: Problem, gpu_type: GpuType) -> bool:
    """The problem requires architecture features on this GPU type's target (never on the CPU)."""
    return bool(gpu_type.arch and problem.required_features.get(gpu_type.arch))


def features_filter(problem: Problem, gpu_type: GpuType) -> Q:
    met = Q(features_met=True)
    return met if requires_features(problem, gpu_type) else met | Q(features_met__isnull=True)
