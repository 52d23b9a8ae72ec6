"""Ranking maintenance: each user's best rank-eligible result per (problem version, GPU type[, shape],
track).

``refresh_rankings_for`` runs after an evaluation reaches a terminal status; it only ever
replaces a row with a strictly better result (a worse later result never displaces a better
earlier one; on equal figures the earlier submission stays). Every result is offered to the
``all`` track; one that meets the problem's required architecture features is offered to the
``features`` track too, which therefore holds each user's best *qualifying* result (not their
best result, if that one misses the features). ``ranking_rows`` reads one track with one
indexed query (``require_features`` picks the ``features`` track).

A result ranks under the catalogue version its submission was made against: a problem whose
version changes (a faster baseline, a new tolerance) starts new rankings, and the old version's
stay as they were, read with ``ranking_rows(..., version=N)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from evaluator.vocabulary import Status
from leaderboard.models import (
    Evaluation,
    EvaluationStatus,
    GpuType,
    Mode,
    Problem,
    RankingEntry,
    RankingTrack,
    Shape,
    ShapeResult,
    is_reference_submission,
)
from leaderboard.signals import rankings_changed


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
    """Ranked mode, passed, eligible by its report, scored, and not a reference line.

    Development-device evaluations qualify too, but only for the ranking of their own GPU type
    (``cpu``, labelled as wall-clock and without SOL everywhere it is shown): rankings are keyed by
    GPU type, so they never mix into a GPU's ranking.
    """
    return (
        evaluation.mode == Mode.RANKED
        and evaluation.status == EvaluationStatus.PASSED
        and evaluation.rank_eligible
        and evaluation.score is not None
        and not is_reference_submission(evaluation.submission)  # shown beside the rankings, never in them
    )


def refresh_rankings_for(evaluation: Evaluation) -> int:
    """Enter an eligible evaluation into its rankings; returns how many rows it took over."""
    evaluation = Evaluation.objects.select_related("submission__problem", "gpu_type").get(pk=evaluation.pk)
    if not is_rank_eligible(evaluation):
        return 0
    submitted_at = evaluation.submission.created_at
    assert evaluation.score is not None
    offers: list[tuple[Shape | None, Candidate]] = [(None, Candidate(evaluation.score, None, submitted_at))]
    for result in _passed_ranked_shape_results(evaluation):
        assert result.median_us is not None
        offers.append((result.shape, Candidate(result.score or 0.0, result.median_us, submitted_at)))
    taken = sum(
        _offer(evaluation, track, shape, candidate)
        for track in tracks_for(evaluation)
        for shape, candidate in offers
    )
    if taken:
        rankings_changed.send(sender=RankingEntry, problem_id=evaluation.submission.problem_id,
                              gpu_type_id=evaluation.gpu_type_id)
    return taken


def tracks_for(evaluation: Evaluation) -> list[str]:
    """Every result enters the ``all`` track; one that meets the required features, ``features`` too."""
    problem = evaluation.submission.problem
    if meets_features(problem, evaluation.gpu_type, evaluation.features_met):
        return [RankingTrack.ALL, RankingTrack.FEATURES]
    return [RankingTrack.ALL]


def _passed_ranked_shape_results(evaluation: Evaluation) -> list[ShapeResult]:
    """The shapes a per-shape ranking exists for: the ranked shapes on a GPU, the small shapes
    flagged ``cpu`` (the only ones it runs) on the development device."""
    shapes = {"shape__cpu": True} if evaluation.gpu_type.development_device else {"shape__ranked": True}
    return list(
        evaluation.shape_results.filter(
            status=Status.PASSED, median_us__isnull=False, **shapes
        ).select_related("shape")
    )


def _offer(evaluation: Evaluation, track: str, shape: Shape | None, candidate: Candidate) -> bool:
    """Insert or improve the user's row in one track; safe against concurrent site workers."""
    submission = evaluation.submission
    key = {
        "problem_id": submission.problem_id,
        "problem_version": submission.problem_version,
        "gpu_type_id": evaluation.gpu_type_id,
        "shape": shape,
        "track": track,
        "user_id": submission.user_id,
    }
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
    require_features: bool = False, version: int | None = None,
) -> list[RankingEntry]:
    """The ranking, best first, each row with ``rank`` (1-based) set.

    ``version``: the problem's catalogue version whose ranking to read (default: the current one).

    ``require_features``: the ``features`` track, each user's best result among those that meet
    the features the problem requires on this GPU type's target (see ``meets_features``); a user
    whose fastest result misses them appears with their best result that meets them.

    Each row comes with its user; its submission and evaluation only as ids (a page that shows
    100 rows must not load 100 reports, logs and sources).
    """
    order: tuple[str, ...] = ("-score", "submitted_at") if shape is None else ("median_us", "submitted_at")
    track = RankingTrack.FEATURES if require_features else RankingTrack.ALL
    rows = list(
        RankingEntry.objects.filter(
            problem=problem,
            problem_version=version or problem.version,
            gpu_type=gpu_type,
            shape=shape,
            track=track,
        )
        .select_related("user")
        .order_by(*order, "id")[:limit]
    )
    for position, row in enumerate(rows, start=1):
        row.rank = position  # type: ignore[attr-defined]
    return rows


def ranked_versions(problem: Problem) -> list[int]:
    """The catalogue versions of this problem that have rankings, newest first (the current version
    always among them, ranked or not)."""
    stored = RankingEntry.objects.filter(problem=problem).values_list("problem_version", flat=True).distinct()
    return sorted({problem.version, *stored}, reverse=True)


def requires_features(problem: Problem, gpu_type: GpuType) -> bool:
    """The problem requires architecture features on this GPU type's target (never on the CPU)."""
    return bool(gpu_type.arch and problem.required_features.get(gpu_type.arch))


def meets_features(problem: Problem, gpu_type: GpuType, features_met: bool | None) -> bool:
    """A result with this ``features_met`` belongs in the ``features`` track.

    Its evidence shows every required feature (True); or the problem requires nothing on this
    target and there is nothing to judge (null). Where something is required, a result without
    evidence (a Python submission) does not qualify: nothing shows it uses those features.
    """
    if features_met is None:
        return not requires_features(problem, gpu_type)
    return features_met


def features_filter(problem: Problem, gpu_type: GpuType) -> Q:
    """``meets_features`` as a query on ``features_met`` (of evaluations or ranking rows)."""
    met = Q(features_met=True)
    return met if requires_features(problem, gpu_type) else met | Q(features_met__isnull=True)
