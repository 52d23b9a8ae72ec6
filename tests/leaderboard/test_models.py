"""The data model's guarantees, on whatever database DATABASE_URL names (PostgreSQL in CI)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from leaderboard.models import (
    ALLOWED_TRANSITIONS,
    TERMINAL_STATUSES,
    ApiToken,
    Evaluation,
    EvaluationStatus,
    GpuType,
    IllegalTransition,
    Problem,
    RankingEntry,
    RunnerNode,
    Shape,
    ShapeResult,
    SourceMismatch,
    Submission,
    sha256_text,
)

pytestmark = pytest.mark.django_db
S = EvaluationStatus


def first_problem(problems: dict[str, Problem]) -> Problem:
    assert problems, "the catalogue must hold at least one problem"
    return next(iter(problems.values()))


@pytest.fixture
def submission(alice: Any, problems: dict[str, Problem]) -> Submission:
    problem = first_problem(problems)
    return Submission.objects.create(
        user=alice, problem=problem, problem_version=problem.version, language="python", source="print(1)\n"
    )


@pytest.fixture
def evaluation(submission: Submission, gpu_types: dict[str, GpuType]) -> Evaluation:
    return Evaluation.objects.create(submission=submission, gpu_type=gpu_types["h100"], mode="ranked")


def refused(callable_: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        callable_(*args, **kwargs)


def test_it_refuses_a_second_gpu_type_with_the_same_key(gpu_types: dict[str, GpuType]) -> None:
    refused(GpuType.objects.create, key="h100", name="another H100")


def test_it_refuses_a_second_problem_with_the_same_name(problems: dict[str, Problem]) -> None:
    problem = first_problem(problems)
    refused(Problem.objects.create, name=problem.name, title="dup", version=1, synced_at=problem.synced_at)


def test_it_refuses_a_duplicate_shape_within_a_problem(problems: dict[str, Problem]) -> None:
    shape = first_problem(problems).shapes.first()
    refused(Shape.objects.create, problem=shape.problem, shape_id=shape.shape_id, axes=shape.axes)


def test_it_refuses_a_second_runner_with_the_same_name(gpu_types: dict[str, GpuType]) -> None:
    RunnerNode.objects.create(name="host-a:0", gpu_type=gpu_types["h200"])
    refused(RunnerNode.objects.create, name="host-a:0")


def test_it_refuses_two_evaluations_with_the_same_run_number(evaluation: Evaluation) -> None:
    refused(Evaluation.objects.create, submission=evaluation.submission, gpu_type=evaluation.gpu_type,
            mode="ranked", run_number=1)


def test_a_rerun_is_a_new_evaluation_row(evaluation: Evaluation) -> None:
    rerun = Evaluation.objects.create(submission=evaluation.submission, gpu_type=evaluation.gpu_type,
                                      mode="ranked", run_number=2)
    assert rerun.job_id != evaluation.job_id
    assert rerun.secret_seed != evaluation.secret_seed


def test_it_refuses_a_status_outside_the_choices(evaluation: Evaluation) -> None:
    refused(Evaluation.objects.filter(pk=evaluation.pk).update, status="finished")


def test_it_refuses_a_duplicate_shape_result(evaluation: Evaluation) -> None:
    shape = evaluation.submission.problem.shapes.first()
    ShapeResult.objects.create(evaluation=evaluation, shape=shape, status="PASSED", correct=True)
    refused(ShapeResult.objects.create, evaluation=evaluation, shape=shape, status="PASSED")


def test_it_keeps_one_ranking_row_per_user_for_the_problem_and_one_per_shape(evaluation: Evaluation) -> None:
    sub = evaluation.submission
    common = {
        "problem": sub.problem,
        "gpu_type": evaluation.gpu_type,
        "user": sub.user,
        "submission": sub,
        "evaluation": evaluation,
        "submitted_at": sub.created_at,
        "problem_version": sub.problem_version,
    }
    shape = sub.problem.shapes.first()
    RankingEntry.objects.create(shape=None, score=0.6, **common)
    RankingEntry.objects.create(shape=shape, score=0.6, median_us=10.0, **common)
    refused(RankingEntry.objects.create, shape=None, score=0.7, **common)
    refused(RankingEntry.objects.create, shape=shape, score=0.7, median_us=9.0, **common)
    # Each catalogue version of the problem ranks apart: one row per user in each.
    other = {**common, "problem_version": sub.problem_version + 1}
    RankingEntry.objects.create(shape=None, score=0.7, **other)
    RankingEntry.objects.create(shape=shape, score=0.7, median_us=9.0, **other)


def test_it_keeps_one_ranking_row_per_user_in_each_track(evaluation: Evaluation) -> None:
    sub = evaluation.submission
    common = {"problem": sub.problem, "gpu_type": evaluation.gpu_type, "user": sub.user, "submission": sub,
              "evaluation": evaluation, "submitted_at": sub.created_at, "shape": None,
              "problem_version": sub.problem_version}
    RankingEntry.objects.create(track="all", score=0.6, **common)
    RankingEntry.objects.create(track="features", score=0.5, **common)
    refused(RankingEntry.objects.create, track="features", score=0.4, **common)
    refused(RankingEntry.objects.create, track="fastest", score=0.4, **common)


def test_the_transition_map_lets_nothing_leave_a_terminal_status() -> None:
    assert {S.PASSED, S.FAILED, S.ERROR, S.TIMEOUT, S.REJECTED, S.CANCELLED} == TERMINAL_STATUSES
    assert not any(status in ALLOWED_TRANSITIONS for status in TERMINAL_STATUSES)


def test_an_evaluation_moves_queued_running_passed_with_timestamps(evaluation: Evaluation) -> None:
    assert evaluation.transition(S.RUNNING, expected=(S.QUEUED,))
    assert evaluation.status == S.RUNNING and evaluation.started_at is not None
    assert evaluation.transition(S.PASSED, evaluator_status="PASSED")
    assert evaluation.status == S.PASSED and evaluation.finished_at is not None
    assert evaluation.evaluator_status == "PASSED"


def test_only_one_of_two_claims_of_a_queued_evaluation_wins(evaluation: Evaluation) -> None:
    other_copy = Evaluation.objects.get(pk=evaluation.pk)
    assert evaluation.transition(S.RUNNING, expected=(S.QUEUED,))
    assert not other_copy.transition(S.RUNNING, expected=(S.QUEUED,))


def test_a_terminal_status_never_changes_through_transition(evaluation: Evaluation) -> None:
    evaluation.transition(S.RUNNING)
    evaluation.transition(S.FAILED)
    assert not evaluation.transition(S.RUNNING)
    assert not evaluation.transition(S.QUEUED)
    assert Evaluation.objects.get(pk=evaluation.pk).status == S.FAILED


def test_queued_cannot_jump_to_passed(evaluation: Evaluation) -> None:
    assert not evaluation.transition(S.PASSED)
    assert Evaluation.objects.get(pk=evaluation.pk).status == S.QUEUED


def test_save_refuses_a_disallowed_change_of_status(evaluation: Evaluation) -> None:
    evaluation.status = S.PASSED
    with pytest.raises(IllegalTransition, match="queued -> passed"):
        evaluation.save()
    assert Evaluation.objects.get(pk=evaluation.pk).status == S.QUEUED


def test_save_with_a_stale_copy_cannot_resurrect_a_finished_evaluation(evaluation: Evaluation) -> None:
    stale = Evaluation.objects.get(pk=evaluation.pk)
    evaluation.transition(S.RUNNING)
    evaluation.transition(S.TIMEOUT)
    stale.message = "edited"
    with pytest.raises(IllegalTransition, match="timeout -> queued"):
        stale.save()


def test_a_running_evaluation_can_be_requeued_after_its_runner_is_lost(evaluation: Evaluation) -> None:
    runner = RunnerNode.objects.create(name="lost:0")
    evaluation.transition(S.RUNNING, runner=runner)
    assert evaluation.transition(S.QUEUED)
    assert evaluation.runner is None and evaluation.started_at is None and evaluation.enqueued_at is None


def test_a_submission_stores_the_sha256_of_its_source(submission: Submission) -> None:
    assert submission.source_sha256 == sha256_text("print(1)\n")
    assert Submission.objects.filter(source_sha256=submission.source_sha256).count() == 1
    assert submission.source_intact()


def test_a_submission_with_a_wrong_sha256_is_refused(alice: Any, problems: dict[str, Problem]) -> None:
    problem = first_problem(problems)
    with pytest.raises(SourceMismatch):
        Submission.objects.create(user=alice, problem=problem, problem_version=1, language="python",
                                  source="x = 1\n", source_sha256="0" * 64)


def test_it_refuses_a_language_outside_the_choices(submission: Submission) -> None:
    refused(Submission.objects.filter(pk=submission.pk).update, language="fortran")


def test_an_api_token_hash_is_unique(alice: Any) -> None:
    token, _plain = ApiToken.issue(alice)
    refused(ApiToken.objects.create, user=alice, prefix=token.prefix, token_hash=token.token_hash)


def test_a_runner_is_alive_only_with_a_recent_heartbeat(settings: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.SOLBOARD_RUNNER_STALE_SECONDS = 90
    runner = RunnerNode(name="r", last_heartbeat=timezone.now() - timedelta(seconds=30))
    assert runner.is_alive
    runner.last_heartbeat = timezone.now() - timedelta(seconds=91)
    assert not runner.is_alive
    assert not RunnerNode(name="never").is_alive
