"""Rankings: each user's best eligible result appears once per track; ties go to the earlier submission.

The ``features`` track (``require_features=True``) holds each user's best result among those that
meet the problem's required features: gemm_bf16 on h100 (sm_90a) requires wgmma + TMA, vector_add
requires nothing. ``features_met`` is set on the evaluation as the site worker sets it from a report.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from leaderboard.models import (
    Evaluation,
    EvaluationStatus,
    GpuType,
    Problem,
    RankingEntry,
    Shape,
    ShapeResult,
    Submission,
)
from leaderboard.ranking_maintenance import features_filter, ranking_rows, refresh_rankings_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem(problems: dict[str, Problem]) -> Problem:
    return next(iter(problems.values()))


@pytest.fixture
def h100(gpu_types: dict[str, GpuType]) -> GpuType:
    return gpu_types["h100"]


def ranked_shape(problem: Problem) -> Shape | None:
    return problem.shapes.filter(ranked=True).first()


def finished(user: Any, problem: Problem, gpu: GpuType, score: float, *, mode: str = "ranked",
             eligible: bool = True, median_us: float = 100.0, minutes_ago: int = 0,
             outcome: str = EvaluationStatus.PASSED, features_met: bool | None = None) -> Evaluation:
    """A submission evaluated to ``outcome`` with one ranked shape result, as a site worker stores it."""
    submission = Submission.objects.create(user=user, problem=problem, problem_version=problem.version,
                                           language="python", source=f"# {score} {median_us} {minutes_ago}\n")
    Submission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    evaluation = Evaluation.objects.create(submission=submission, gpu_type=gpu, mode=mode)
    evaluation.transition(EvaluationStatus.RUNNING)
    shape = ranked_shape(problem)
    if shape is not None:
        ShapeResult.objects.create(evaluation=evaluation, shape=shape, status="PASSED", correct=True,
                                   median_us=median_us, score=score)
    evaluation.transition(outcome, score=score, rank_eligible=eligible, features_met=features_met)
    refresh_rankings_for(evaluation)
    return evaluation


def scores(problem: Problem, gpu: GpuType) -> list[tuple[str, float]]:
    return [(row.user.username, row.score) for row in ranking_rows(problem, gpu)]


def test_an_eligible_ranked_pass_enters_the_problem_ranking(
    alice: Any, problem: Problem, h100: GpuType
) -> None:
    evaluation = finished(alice, problem, h100, 0.7)
    rows = ranking_rows(problem, h100)
    assert [(row.rank, row.user, row.evaluation_id) for row in rows] == [(1, alice, evaluation.pk)]


def test_a_worse_later_result_does_not_replace_a_better_earlier_one(alice: Any, problem: Problem,
                                                                     h100: GpuType) -> None:
    best = finished(alice, problem, h100, 0.8, minutes_ago=10)
    finished(alice, problem, h100, 0.6, minutes_ago=1)
    assert scores(problem, h100) == [("alice", 0.8)]
    assert ranking_rows(problem, h100)[0].evaluation_id == best.pk


def test_a_better_later_result_replaces_the_users_row(alice: Any, problem: Problem, h100: GpuType) -> None:
    finished(alice, problem, h100, 0.6, minutes_ago=10)
    finished(alice, problem, h100, 0.9, minutes_ago=1)
    assert scores(problem, h100) == [("alice", 0.9)]


def test_equal_scores_rank_the_earlier_submission_first(alice: Any, bob: Any, problem: Problem,
                                                        h100: GpuType) -> None:
    finished(bob, problem, h100, 0.75, minutes_ago=1)
    finished(alice, problem, h100, 0.75, minutes_ago=5)
    assert [name for name, _ in scores(problem, h100)] == ["alice", "bob"]


def test_an_equal_later_result_keeps_the_earlier_row(alice: Any, problem: Problem, h100: GpuType) -> None:
    first = finished(alice, problem, h100, 0.75, minutes_ago=5)
    finished(alice, problem, h100, 0.75, minutes_ago=1)
    assert ranking_rows(problem, h100)[0].evaluation_id == first.pk


def test_users_are_ordered_by_score(alice: Any, bob: Any, problem: Problem, h100: GpuType) -> None:
    finished(alice, problem, h100, 0.55)
    finished(bob, problem, h100, 0.95)
    assert scores(problem, h100) == [("bob", 0.95), ("alice", 0.55)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "test"},
        {"eligible": False},
        {"outcome": EvaluationStatus.FAILED},
    ],
    ids=["test-mode", "not-rank-eligible", "failed"],
)
def test_ineligible_evaluations_never_enter(alice: Any, problem: Problem, h100: GpuType,
                                            kwargs: dict[str, Any]) -> None:
    finished(alice, problem, h100, 0.9, **kwargs)
    assert ranking_rows(problem, h100) == []


def test_the_cpu_development_device_has_its_own_ranking_and_never_enters_a_gpus(
    alice: Any, problem: Problem, gpu_types: dict[str, GpuType]
) -> None:
    finished(alice, problem, gpu_types["cpu"], 0.9)
    assert scores(problem, gpu_types["cpu"]) == [("alice", 0.9)]
    for key, gpu in gpu_types.items():
        if key != "cpu":
            assert ranking_rows(problem, gpu) == []


def test_per_shape_rankings_order_by_median_time(
    alice: Any, bob: Any, problem: Problem, h100: GpuType
) -> None:
    shape = ranked_shape(problem)
    if shape is None:
        pytest.skip(f"{problem.name} has no ranked shape")
    finished(alice, problem, h100, 0.9, median_us=50.0)
    finished(bob, problem, h100, 0.95, median_us=20.0)
    rows = ranking_rows(problem, h100, shape)
    assert [(row.user.username, row.median_us) for row in rows] == [("bob", 20.0), ("alice", 50.0)]


def test_a_slower_later_shape_result_never_replaces_a_faster_one_in_the_shape_ranking(
        alice: Any, problem: Problem, h100: GpuType) -> None:
    shape = ranked_shape(problem)
    if shape is None:
        pytest.skip(f"{problem.name} has no ranked shape")
    faster = finished(alice, problem, h100, 0.6, median_us=20.0, minutes_ago=10)
    # Later, better overall (so the problem row moves) but slower on this shape.
    better_overall = finished(alice, problem, h100, 0.9, median_us=35.0, minutes_ago=1)
    rows = ranking_rows(problem, h100, shape)
    assert [(row.evaluation_id, row.median_us) for row in rows] == [(faster.pk, 20.0)]
    assert [row.evaluation_id for row in ranking_rows(problem, h100)] == [better_overall.pk]


def test_rankings_are_per_gpu_type(alice: Any, problem: Problem, gpu_types: dict[str, GpuType]) -> None:
    finished(alice, problem, gpu_types["h100"], 0.7)
    assert ranking_rows(problem, gpu_types["h200"]) == []


# ---------------------------------------------------------------- the features track


@pytest.fixture
def gemm(problems: dict[str, Problem]) -> Problem:
    return problems["gemm_bf16"]


def evaluations(
    problem: Problem, gpu: GpuType, shape: Shape | None = None, **kwargs: Any
) -> list[tuple[str, int]]:
    return [(row.user.username, row.evaluation_id) for row in ranking_rows(problem, gpu, shape, **kwargs)]


def test_a_faster_result_without_the_features_leads_while_a_slower_one_with_them_is_the_filtered_row(
    alice: Any, bob: Any, gemm: Problem, h100: GpuType
) -> None:
    fast = finished(alice, gemm, h100, 0.9, median_us=20.0, features_met=False, minutes_ago=10)
    slow = finished(alice, gemm, h100, 0.6, median_us=50.0, features_met=True, minutes_ago=1)
    other = finished(bob, gemm, h100, 0.7, median_us=30.0, features_met=True, minutes_ago=5)
    assert evaluations(gemm, h100) == [("alice", fast.pk), ("bob", other.pk)]
    assert evaluations(gemm, h100, require_features=True) == [("bob", other.pk), ("alice", slow.pk)]
    shape = ranked_shape(gemm)
    assert shape is not None
    assert evaluations(gemm, h100, shape) == [("alice", fast.pk), ("bob", other.pk)]
    assert evaluations(gemm, h100, shape, require_features=True) == [("bob", other.pk), ("alice", slow.pk)]


def test_a_better_later_qualifying_result_replaces_the_earlier_one_in_the_features_track_only(
    alice: Any, gemm: Problem, h100: GpuType
) -> None:
    fast = finished(alice, gemm, h100, 0.9, features_met=False, minutes_ago=10)
    finished(alice, gemm, h100, 0.5, features_met=True, minutes_ago=8)
    better = finished(alice, gemm, h100, 0.7, features_met=True, minutes_ago=1)
    assert evaluations(gemm, h100) == [("alice", fast.pk)]
    assert evaluations(gemm, h100, require_features=True) == [("alice", better.pk)]


def test_an_equal_later_qualifying_result_keeps_the_earlier_row_in_the_features_track(
    alice: Any, gemm: Problem, h100: GpuType
) -> None:
    first = finished(alice, gemm, h100, 0.7, features_met=True, minutes_ago=5)
    finished(alice, gemm, h100, 0.7, features_met=True, minutes_ago=1)
    assert evaluations(gemm, h100, require_features=True) == [("alice", first.pk)]


def test_equal_scores_in_the_features_track_rank_the_earlier_submission_first(
    alice: Any, bob: Any, gemm: Problem, h100: GpuType
) -> None:
    finished(bob, gemm, h100, 0.7, features_met=True, minutes_ago=1)
    finished(alice, gemm, h100, 0.7, features_met=True, minutes_ago=5)
    assert [name for name, _ in evaluations(gemm, h100, require_features=True)] == ["alice", "bob"]


@pytest.mark.parametrize(
    ("problem_name", "features_met", "qualifies"),
    [
        ("gemm_bf16", True, True),
        ("gemm_bf16", False, False),
        ("gemm_bf16", None, False),  # required, and nothing shows it is used (Python)
        ("vector_add", None, True),  # nothing required, nothing to judge
        ("vector_add", False, False),
    ],
)
def test_a_result_enters_the_features_track_only_when_it_meets_the_requirement(
    alice: Any, problems: dict[str, Problem], h100: GpuType, problem_name: str, features_met: bool | None,
    qualifies: bool,
) -> None:
    problem = problems[problem_name]
    evaluation = finished(alice, problem, h100, 0.8, features_met=features_met)
    assert evaluations(problem, h100) == [("alice", evaluation.pk)]
    assert evaluations(problem, h100, require_features=True) == (
        [("alice", evaluation.pk)] if qualifies else []
    )
    assert Evaluation.objects.filter(features_filter(problem, h100), pk=evaluation.pk).exists() == qualifies


def test_the_migration_starts_the_features_track_from_the_rows_stored_before_it(
    alice: Any, bob: Any, problems: dict[str, Problem], gpu_types: dict[str, GpuType]
) -> None:
    """Rows stored before migration 0002 have no evidence: they qualify where nothing is required."""
    for problem in (problems["vector_add"], problems["gemm_bf16"]):
        for gpu in (gpu_types["h100"], gpu_types["cpu"]):
            finished(alice, problem, gpu, 0.8)
            finished(bob, problem, gpu, 0.6)
    tracked = RankingEntry.objects.filter(track="features")
    built_by_refresh = set(
        tracked.values_list("problem__name", "gpu_type__key", "shape", "user", "evaluation")
    )
    tracked.delete()
    migration = importlib.import_module("leaderboard.migrations.0002_ptx_evidence_and_features_met")
    migration.copy_rows_that_meet_the_features(apps, None)
    rebuilt = set(tracked.values_list("problem__name", "gpu_type__key", "shape", "user", "evaluation"))
    assert rebuilt == built_by_refresh
    assert {(name, gpu) for name, gpu, *_ in rebuilt} == {("vector_add", "h100"), ("vector_add", "cpu"),
                                                          ("gemm_bf16", "cpu")}
