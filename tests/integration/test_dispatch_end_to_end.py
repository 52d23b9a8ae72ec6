"""End to end through real processes: create_submission -> broker -> CPU runner node (real
evaluator, real sandbox) -> site worker -> database -> ranking row; and what happens when things
fail: a runner killed mid-job, a job that hangs, a cancel (queued and running).

The site worker and the runner are subprocesses, so the database must be one they can open: a
SQLite file created for this module (or, when DATABASE_URL names PostgreSQL, a fresh database on
that server), migrated and synced here; the broker is a temporary embedded one (or a Redis
database of its own when CELERY_BROKER_URL names Redis).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from leaderboard import dispatch
from leaderboard.models import Evaluation, RankingEntry, RunnerAuthFailure, RunnerNode, ShapeResult
from leaderboard.submissions import create_submission
from runners.celery_app import build_app
from solboard_common.protocol import SITE_QUEUE, SITE_RESULT_TASK
from solboard_common.signing import sign
from tests.integration.cluster import Cluster, running_cluster, wait_for
from tests.runner_helpers import HANGING_KERNEL, RunnerProcess

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "python" / "vector_add.py").read_text()
# Slow to import on every delivery, so the test can kill its runner mid-job. (A job can no longer
# leave a mark for the next delivery: the jail gives each job a fresh, private file system.)
SLOW_IMPORT = """
import time

time.sleep(6)

def kernel(a, b, c):
    c.copy_(a + b)
"""
STALE_S = 5
#: Each user's evaluations in the broker at once (the fairness test's K).
INFLIGHT = 2
ENV = {"SOLBOARD_RUNNER_STALE_SECONDS": str(STALE_S), "SOLBOARD_SWEEP_SECONDS": "1",
       "SOLBOARD_HEARTBEAT_SECONDS": "1", "SOLBOARD_JOB_COMPILE_SECONDS": "30",
       "SOLBOARD_JOB_TEST_SECONDS": "5", "SOLBOARD_JOB_RANKED_SECONDS": "60",
       "SOLBOARD_MAX_INFLIGHT_PER_USER": str(INFLIGHT)}


@pytest.fixture(scope="module")
def cluster(django_db_blocker: Any) -> Iterator[Cluster]:
    # This process's settings were read before ENV was set: the same values, as settings.
    settings = {
        "SOLBOARD_RUNNER_STALE_SECONDS": STALE_S,
        "SOLBOARD_SWEEP_SECONDS": 1,
        "SOLBOARD_JOB_COMPILE_SECONDS": 30,
        "SOLBOARD_JOB_TEST_SECONDS": 5,
        "SOLBOARD_JOB_RANKED_SECONDS": 60,
        "SOLBOARD_MAX_INFLIGHT_PER_USER": INFLIGHT,
    }
    with running_cluster(django_db_blocker, ENV, settings, redis_db=13) as running:
        yield running


@pytest.fixture(scope="module")
def runner_a(cluster: Cluster) -> RunnerProcess:
    return cluster.runner(f"a{os.getpid()}")


def user(name: str) -> Any:
    return get_user_model().objects.get_or_create(username=name)[0]


def submit(name: str, source: str = EXAMPLE, mode: str = "ranked") -> Evaluation:
    return create_submission(user(name), "vector_add", "python", source, ["cpu"], mode).evaluations.get()


def test_a_submission_reaches_the_cpu_runner_and_comes_back_as_a_stored_ranked_report(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    evaluation = wait_for(submit("carol"), lambda e: e.status not in ("queued", "running"))
    assert evaluation.status == "passed", evaluation.message
    assert evaluation.report["device"]["gpu_type"] == "cpu" and evaluation.report["sandbox"]["gaps"]
    assert evaluation.score is not None and 0 < evaluation.score < 1
    assert evaluation.shape_results.count() == len(evaluation.report["shapes"]) == 2
    assert evaluation.runner.name == f"{runner_a.name}:cpu" and evaluation.attempts == 1
    # Its provisional result (ranked stage done, before the witness) came first; the final replaced it.
    assert evaluation.provisional_at is not None and evaluation.provisional_at <= evaluation.finished_at
    assert evaluation.provisional_report is None
    # Ranked (in the development ranking) only once the judge's clock confirmed every median.
    assert evaluation.rank_eligible is evaluation.report["witnessed"]
    # The rankings are refreshed right after the status commits (on_commit): wait for that step.
    expected = [evaluation.pk] if evaluation.report["witnessed"] else []
    deadline = time.monotonic() + 30
    while True:
        rows = RankingEntry.objects.filter(problem__name="vector_add", gpu_type__key="cpu", shape=None,
                                           track="all", user__username="carol")
        if [row.evaluation_id for row in rows] == expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [row.evaluation_id for row in rows] == expected


def test_a_multi_gpu_submission_runs_on_the_cpu_nodes_x2_slot_with_two_ranks(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    source = (REPO / "examples" / "python" / "allreduce.py").read_text()
    created = create_submission(
        user("dave"), "allreduce", "python", source, ["cpu"], "test"
    ).evaluations.get()
    evaluation = wait_for(created, lambda e: e.status not in ("queued", "running"))
    assert evaluation.status == "passed", evaluation.message
    assert evaluation.runner.name == f"{runner_a.name}:cpux2"
    assert evaluation.report["world_size"] == 2
    assert all(len(shape["timing"]["rank_median_us"]) == 2 for shape in evaluation.report["shapes"])


def test_the_same_result_delivered_twice_through_the_broker_is_recorded_once(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    evaluation = wait_for(submit("dave", mode="test"), lambda e: e.status == "passed")
    rows = list(ShapeResult.objects.filter(evaluation=evaluation).values_list("id", flat=True))
    replay = {
        "job_id": str(evaluation.job_id),
        "evaluation_id": evaluation.pk,
        "runner": evaluation.runner.name,
        "outcome": "completed",
        "report": evaluation.report,
    }
    app = build_app(cluster.broker)
    signed = sign(SITE_RESULT_TASK, replay, runner_a.credential)
    for payload in (signed, signed, replay):  # a re-send, an exact replay, an unsigned forgery
        app.send_task(SITE_RESULT_TASK, args=[payload], queue=SITE_QUEUE)
    deadline = time.monotonic() + 30
    while RunnerAuthFailure.objects.filter(reason__in=("replay", "unsigned")).count() < 2:
        assert time.monotonic() < deadline, "the site worker did not refuse the replay and the forgery"
        time.sleep(0.3)
    assert list(ShapeResult.objects.filter(evaluation=evaluation).values_list("id", flat=True)) == rows


def test_a_hanging_job_times_out_and_the_runner_takes_the_next_one(
    cluster: Cluster, runner_a: RunnerProcess
) -> None:
    hanging, after = submit("erin", HANGING_KERNEL, mode="test"), submit("frank", mode="test")
    assert wait_for(hanging, lambda e: e.is_terminal).status == "timeout"
    assert wait_for(after, lambda e: e.is_terminal).status == "passed"


def test_cancel_stops_a_running_and_a_queued_evaluation_and_frees_the_runner(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    with override_settings(SOLBOARD_JOB_TEST_SECONDS=120):  # hangs for longer than the test lasts
        running, queued = (
            submit("gina", HANGING_KERNEL, mode="test"),
            submit("gina", HANGING_KERNEL, mode="test"),
        )
    wait_for(running, lambda e: e.status == "running")
    assert dispatch.cancel_evaluation(queued, user("gina"))
    assert dispatch.cancel_evaluation(running, user("gina"))
    node = RunnerNode.objects.get(name=f"{runner_a.name}:cpu")
    started = time.monotonic()
    while node.current_job_id in (str(running.job_id), str(queued.job_id)) or time.monotonic() - started < 3:
        assert time.monotonic() - started < 40, "the runner still runs a cancelled job"
        time.sleep(0.5)
        node.refresh_from_db()
    after = wait_for(submit("hank", mode="test"), lambda e: e.is_terminal, timeout=60)
    assert after.status == "passed"
    for evaluation in (running, queued):
        evaluation.refresh_from_db()
        assert evaluation.status == "cancelled"


def longest_run(owners: list[str]) -> int:
    """The most jobs of one user that started one after the other."""
    longest = current = 0
    for index, owner in enumerate(owners):
        current = current + 1 if index and owner == owners[index - 1] else 1
        longest = max(longest, current)
    return longest


def test_two_users_looping_at_once_share_the_runner_fairly_each_job_in_a_spare_of_its_own(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    """Two agent loops on one CPU runner: ivan fires 5 submissions, then judy 5. With each user
    held to K in the broker, their jobs start in turns of at most K (first come, first served
    would run all of ivan's first), both loops finish, and every job ran in a warm spare no other
    job (of either user) used."""
    loops = {name: [submit(name, mode="test") for _ in range(5)] for name in ("ivan", "judy")}
    done = [
        wait_for(evaluation, lambda e: e.is_terminal, timeout=300)
        for batch in loops.values()
        for evaluation in batch
    ]
    assert [evaluation.status for evaluation in done] == ["passed"] * 10, [e.message for e in done]
    by_start = sorted(done, key=lambda evaluation: evaluation.started_at)
    owners = [evaluation.submission.user.username for evaluation in by_start]
    assert longest_run(owners) <= INFLIGHT, owners
    assert owners.index("judy") < INFLIGHT * 2, owners  # judy never waits for all of ivan's loop
    spares = [evaluation.report["sandbox"].get("warm_spare_id") for evaluation in by_start]
    assert sum(spare is not None for spare in spares) >= 8, spares  # warm spares served the loops
    used = [spare for spare in spares if spare is not None]
    assert len(set(used)) == len(used), spares  # one spare, one job: never shared, never across users
    assert all(evaluation.gpu_seconds is not None and evaluation.gpu_seconds > 0 for evaluation in done)


def test_a_runner_killed_mid_job_is_replaced_and_the_job_completes_exactly_once(
        cluster: Cluster, runner_a: RunnerProcess) -> None:
    evaluation = wait_for(submit("ivan", SLOW_IMPORT, mode="test"), lambda e: e.status == "running")
    time.sleep(1.0)
    runner_a.kill_hard()
    first_job = evaluation.job_id
    cluster.runner(f"b{os.getpid()}")
    evaluation = wait_for(evaluation, lambda e: e.is_terminal, timeout=120)
    assert evaluation.status == "passed", evaluation.message
    assert evaluation.attempts == 2 and evaluation.job_id != first_job
    assert evaluation.shape_results.count() == len(evaluation.report["shapes"])
    assert evaluation.runner.name.startswith("b")
