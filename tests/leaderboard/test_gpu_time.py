"""GPU time per evaluation, per user and per token (leaderboard/gpu_time.py), and the quotas in
GPU-seconds per day (leaderboard/api/quotas.py), against the real database and a real broker.

The cast (tests/conftest.py): alice runs an agent loop with two tokens; bob's figures are his own.
Results arrive as a runner sends them (``dispatch.store_result``), with the runner's GPU hold;
the site's own clock is set by moving the job's recorded start back.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard import dispatch
from leaderboard.models import ApiToken, Evaluation, Submission
from leaderboard.submissions import create_submission
from solboard_common.protocol import JobResult, JobStarted
from tests.leaderboard.api_support import catalogue, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["catalogue"]

REPO = Path(__file__).resolve().parents[2]
RUNNER = "node-a:cpu"


def token_client(user: Any, name: str) -> tuple[ApiToken, APIClient]:
    token, plain = ApiToken.issue(user, name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return token, client


def submitted(client: APIClient) -> Evaluation:
    answer = client.post("/api/submissions", submit_body(), format="json")
    assert answer.status_code == 201, answer.json()
    return Evaluation.objects.get(submission_id=answer.json()["id"])


def run_for(evaluation: Evaluation, site_seconds: float, runner: str = RUNNER) -> None:
    """The job started on ``runner`` ``site_seconds`` ago by the site's clock."""
    assert (
        dispatch.record_started(
            JobStarted(
                job_id=str(evaluation.job_id),
                evaluation_id=evaluation.pk,
                runner=runner,
                started_at=timezone.now().isoformat(),
            )
        )
        == "running"
    )
    Evaluation.objects.filter(pk=evaluation.pk).update(
        started_at=timezone.now() - timedelta(seconds=site_seconds)
    )
    evaluation.refresh_from_db()


def result(evaluation: Evaluation, outcome: str = "timeout", hold: float | None = None,
           runner: str = RUNNER) -> JobResult:
    return JobResult(
        job_id=str(evaluation.job_id),
        evaluation_id=evaluation.pk,
        runner=runner,
        outcome=outcome,  # type: ignore[arg-type]
        message="the job ran past the runner's wall limit",
        gpu_hold_seconds=hold,
    )


def gpu_seconds(evaluation: Evaluation) -> float | None:
    evaluation.refresh_from_db()
    return evaluation.gpu_seconds


def test_a_job_records_the_runners_gpu_hold_within_the_sites_wall_time(alice: Any, catalogue: None) -> None:
    _, client = token_client(alice, "loop")
    evaluation = submitted(client)
    run_for(evaluation, 30.0)
    assert dispatch.store_result(result(evaluation, hold=12.5)) == "stored timeout"
    assert gpu_seconds(evaluation) == 12.5


@pytest.mark.parametrize(
    ("claimed", "why"),
    [
        (3600.0, "more than the site saw"),
        (None, "no figure"),
        (-5.0, "negative"),
        (math.inf, "not finite"),
        (math.nan, "not a number"),
    ],
)
def test_a_runners_figure_never_exceeds_the_sites_own_clock(
    alice: Any, catalogue: None, claimed: float | None, why: str
) -> None:
    _, client = token_client(alice, "loop")
    evaluation = submitted(client)
    run_for(evaluation, 20.0)
    dispatch.store_result(result(evaluation, hold=claimed))
    stored = gpu_seconds(evaluation)
    assert stored is not None and 20.0 <= stored < 25.0, why  # the site's wall time, job_started -> result


def test_a_job_whose_started_message_was_lost_is_bounded_from_its_hand_over(
    alice: Any, catalogue: None
) -> None:
    _, client = token_client(alice, "loop")
    evaluation = submitted(client)
    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued_at=timezone.now() - timedelta(seconds=8))
    assert dispatch.store_result(result(evaluation, hold=600.0)) == "stored timeout"
    stored = gpu_seconds(evaluation)
    assert stored is not None and 8.0 <= stored < 12.0


def test_a_runners_fault_records_nothing_and_a_result_delivered_twice_once(
    alice: Any, catalogue: None
) -> None:
    _, client = token_client(alice, "loop")
    evaluation = submitted(client)
    run_for(evaluation, 10.0)
    assert dispatch.store_result(result(evaluation, outcome="runner_error", hold=9.0)) == "requeued"
    assert gpu_seconds(evaluation) is None  # that attempt is the platform's cost
    evaluation.refresh_from_db()
    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued_at=timezone.now())
    run_for(evaluation, 10.0)
    assert dispatch.store_result(result(evaluation, outcome="job_failed", hold=4.0)) == "stored error"
    assert dispatch.store_result(result(evaluation, outcome="job_failed", hold=9.0)).startswith("ignored")
    assert gpu_seconds(evaluation) == 4.0


def test_a_cancelled_running_job_records_the_time_its_runner_reports(alice: Any, catalogue: None) -> None:
    _, client = token_client(alice, "loop")
    evaluation = submitted(client)
    run_for(evaluation, 15.0)
    assert (
        client.post(f"/api/submissions/{evaluation.submission_id}/cancel", {}, format="json").status_code
        == 200
    )
    assert dispatch.store_result(result(evaluation, outcome="cancelled", hold=3.0, runner="node-b:cpu")) \
        == "ignored: already cancelled"  # not the runner that ran it
    assert gpu_seconds(evaluation) is None
    assert dispatch.store_result(result(evaluation, outcome="cancelled", hold=3.0)) \
        == "ignored: already cancelled; GPU time recorded"
    assert gpu_seconds(evaluation) == 3.0


def test_a_multi_gpu_job_counts_every_gpu(
    alice: Any, catalogue: None, django_capture_on_commit_callbacks: Any
) -> None:
    source = (REPO / "examples" / "python" / "allreduce.py").read_text()
    with django_capture_on_commit_callbacks(execute=True):
        submission = create_submission(alice, "allreduce", "python", source, ["cpu"], "test")
    evaluation = submission.evaluations.get()
    run_for(evaluation, 30.0, runner="node-a:cpux2")
    dispatch.store_result(result(evaluation, hold=6.0, runner="node-a:cpux2"))
    assert gpu_seconds(evaluation) == 12.0  # world size 2


def finished_with(client: APIClient, seconds: float, ended_ago: timedelta = timedelta()) -> Evaluation:
    evaluation = submitted(client)
    run_for(evaluation, seconds + 1)
    assert dispatch.store_result(result(evaluation, outcome="job_failed", hold=seconds)) == "stored error"
    Evaluation.objects.filter(pk=evaluation.pk).update(finished_at=timezone.now() - ended_ago)
    return evaluation


def test_the_users_gpu_seconds_quota_refuses_with_429_until_the_day_resets(
        alice: Any, bob: Any, catalogue: None, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY = 10
    _, loop = token_client(alice, "loop")
    finished_with(loop, 30.0, ended_ago=timedelta(days=1))  # yesterday's time does not count
    finished_with(loop, 6.0)
    refunded = finished_with(loop, 50.0)  # an infrastructure fault: given back, its time too
    Evaluation.objects.filter(pk=refunded.pk).update(evaluator_status=None)
    assert submitted(loop).gpu_seconds is None  # 6 of 10 used: accepted
    finished_with(loop, 4.0)
    refused = loop.post("/api/submissions", submit_body(), format="json")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "quota_exceeded" and int(refused["Retry-After"]) == error["retry_after"] > 0
    assert (
        error["quota"]["kind"] == "gpu_seconds"
        and error["quota"]["used"] == 10.0
        and error["quota"]["limit"] == 10
    )
    assert error["quota"]["resets_at"].endswith("T00:00:00+00:00") and error["retry_after"] <= 86401
    _, bobs = token_client(bob, "bob")
    assert bobs.post("/api/submissions", submit_body(), format="json").status_code == 201


def test_a_tokens_gpu_seconds_quota_stops_that_token_only(alice: Any, catalogue: None, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_TOKEN_GPU_SECONDS_PER_DAY = 5
    token, greedy = token_client(alice, "greedy agent")
    _, other = token_client(alice, "other agent")
    finished_with(greedy, 5.5)
    refused = greedy.post("/api/submissions", submit_body(), format="json")
    assert refused.status_code == 429 and refused.json()["error"]["quota"]["kind"] == "token_gpu_seconds"
    assert token.prefix in refused.json()["error"]["message"]
    assert other.post("/api/submissions", submit_body(), format="json").status_code == 201


def test_the_totals_show_on_the_quota_the_token_list_and_the_user_page(alice: Any, catalogue: None,
                                                                       settings: Any, client: Any) -> None:
    settings.SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY = 100
    first, loop = token_client(alice, "loop")
    second, other = token_client(alice, "other")
    finished_with(loop, 7.0)
    finished_with(loop, 2.0, ended_ago=timedelta(days=2))
    finished_with(other, 1.5)
    quota = loop.get("/api/quota").json()["gpu_seconds"]
    assert (quota["used_today"], quota["limit_per_day"], quota["left_today"], quota["total"]) == (
        8.5,
        100,
        91.5,
        10.5,
    )
    assert quota["token"]["id"] == first.pk and (quota["token"]["total"], quota["token"]["total_today"]) == (
        9.0,
        7.0,
    )
    assert quota["token"]["limit_per_day"] is None  # no per-token limit set
    listed = {row["id"]: row for row in loop.get("/api/tokens").json()}
    assert (listed[first.pk]["gpu_seconds_total"], listed[first.pk]["gpu_seconds_today"]) == (9.0, 7.0)
    assert (listed[second.pk]["gpu_seconds_total"], listed[second.pk]["gpu_seconds_today"]) == (1.5, 1.5)
    page = client.get(f"/users/{alice.username}/").content.decode()
    assert "GPU time: 10.5 GPU-seconds in all, 8.5 today (UTC)" in page
    assert Submission.objects.filter(user=alice).count() == 3
