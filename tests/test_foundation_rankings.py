"""Rankings: each user's best eligible result appears once; ties go to the earlier submission."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from leaderboard.models import Evaluation, EvaluationStatus, GpuType, Problem, Shape, ShapeResult, Submission
from leaderboard.rankings import ranking_rows, refresh_rankings_for

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
             outcome: str = EvaluationStatus.PASSED) -> Evaluation:
    """A submission evaluated to ``outcome`` with one ranked shape result, as a site worker stores it."""
    submission = Submission.objects.create(user=user, problem=problem, problem_version=problem.version,
                                           language="python", source=f"# {score} {median_us} {minutes_ago}\n")
    Submission.objects.filter(pk=submission.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    evaluation = Evaluation.objects.create(submission=submission, gpu_type=gpu, mode=mode)
    evaluation.transition(EvaluationStatus.RUNNING)
    shape = ranked_shape(problem)
    if shape is not None:
        ShapeResult.objects.create(evaluation=evaluation, shape=shape, status="PASSED", correct=True,
                                   median_us=median_us, score=score)
    evaluation.transition(outcome, score=score, rank_eligible=eligible)
    refresh_rankings_for(evaluation)
    return evaluation


def scores(problem: Problem, gpu: GpuType) -> list[tuple[str, float]]:
    return [(row.user.username, row.score) for row in ranking_rows(problem, gpu)]


def test_an_eligible_ranked_pass_enters_the_problem_ranking(alice: Any, problem: Problem, h100: GpuType) -> None:
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


def test_per_shape_rankings_order_by_median_time(alice: Any, bob: Any, problem: Problem, h100: GpuType) -> None:
    shape = ranked_shape(problem)
    if shape is None:
        pytest.skip(f"{problem.name} has no ranked shape")
    finished(alice, problem, h100, 0.9, median_us=50.0)
    finished(bob, problem, h100, 0.95, median_us=20.0)
    rows = ranking_rows(problem, h100, shape)
    assert [(row.user.username, row.median_us) for row in rows] == [("bob", 20.0), ("alice", 50.0)]


def test_rankings_are_per_gpu_type(alice: Any, problem: Problem, gpu_types: dict[str, GpuType]) -> None:
    finished(alice, problem, gpu_types["h100"], 0.7)
    assert ranking_rows(problem, gpu_types["h200"]) == []
