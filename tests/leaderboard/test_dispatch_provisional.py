"""Provisional results (protocol 2): a ranked job's report when its ranked stage ended, before its
witness, sent by the runner that claimed the job, stored beside the running evaluation, shown on
the API and the submission page, never ranked; the job's final result replaces it.

The reports are real: one ranked CPU evaluation of the example vector_add through the evaluator's
``--stream``, which prints the provisional report and then the final one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard import tasks
from leaderboard.api.presenters import evaluation_state
from leaderboard.dispatch import credentials
from leaderboard.models import Evaluation, RankingEntry, ShapeResult
from leaderboard.submissions import create_submission
from solboard_common.protocol import (
    SITE_PROVISIONAL_TASK,
    SITE_RESULT_TASK,
    SITE_STARTED_TASK,
    JobProvisional,
    JobStarted,
)
from solboard_common.signing import Credential
from tests.leaderboard.api_support import client_for
from tests.leaderboard.dispatch_reports import signed

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "python" / "vector_add.py").read_text()
RUNNER = "node-a:cpu"


@pytest.fixture(scope="module")
def streamed() -> dict[str, dict[str, Any]]:
    """The provisional and the final report of one real ranked CPU evaluation (secret seed given)."""
    out = subprocess.run(
        [sys.executable, "-m", "evaluator", "run", "vector_add", str(REPO / "examples/python/vector_add.py"),
         "--device", "cpu", "--mode", "ranked", "--stream", "--secret-seed-stdin"],
        input="123456789\n", capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=180)
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [event["event"] for event in events] == ["provisional", "report"]
    return {event["event"]: event["report"] for event in events}


@pytest.fixture
def node_a(db: None) -> Credential:
    return credentials.issue("node-a", created_by="operator")[1]


@pytest.fixture
def node_b(db: None) -> Credential:
    return credentials.issue("node-b", created_by="operator")[1]


@pytest.fixture
def running(alice: Any, gpu_types: Any, problems: Any, broker: str, node_a: Credential,
            django_capture_on_commit_callbacks: Any) -> Evaluation:
    """alice's ranked CPU evaluation, claimed by node-a's slot."""
    with django_capture_on_commit_callbacks(execute=True):
        evaluation = create_submission(
            alice, "vector_add", "python", EXAMPLE, ["cpu"], "ranked"
        ).evaluations.get()
    started = JobStarted(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=RUNNER,
                         started_at=timezone.now().isoformat())
    assert tasks.job_started(signed(SITE_STARTED_TASK, started.model_dump(mode="json"), node_a)) == "running"
    evaluation.refresh_from_db()
    return evaluation


def provisional_body(evaluation: Evaluation, report: dict[str, Any], runner: str = RUNNER) -> dict[str, Any]:
    message = JobProvisional(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=runner,
                             report=report)  # type: ignore[arg-type]
    return message.model_dump(mode="json")


def final_body(evaluation: Evaluation, report: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": str(evaluation.job_id), "evaluation_id": evaluation.pk, "runner": RUNNER,
            "outcome": "completed", "report": report}


def send_provisional(evaluation: Evaluation, report: dict[str, Any], credential: Credential,
                     runner: str = RUNNER) -> str:
    return str(
        tasks.store_provisional(
            signed(SITE_PROVISIONAL_TASK, provisional_body(evaluation, report, runner), credential)
        )
    )


def api_evaluation(user: Any, evaluation: Evaluation) -> dict[str, Any]:
    response = client_for(user).get(f"/api/submissions/{evaluation.submission_id}")
    assert response.status_code == 200, response.content
    [body] = response.json()["evaluations"]
    return body  # type: ignore[no-any-return]


def assert_not_ranked(evaluation: Evaluation) -> None:
    evaluation.refresh_from_db()
    assert evaluation.status == "running" and evaluation.score is None and not evaluation.rank_eligible
    assert evaluation.report is None and not ShapeResult.objects.filter(evaluation=evaluation).exists()
    assert not RankingEntry.objects.filter(evaluation=evaluation).exists()


def test_a_provisional_result_is_stored_as_the_site_judged_it_and_never_ranked(
        running: Evaluation, node_a: Credential, streamed: dict[str, dict[str, Any]]) -> None:
    assert send_provisional(running, streamed["provisional"], node_a) == "stored provisional"
    assert_not_ranked(running)
    early = running.current_provisional
    assert early is not None and early["witnessed"] is False and early["rank_eligible"] is False
    assert early["problem_score"] is not None  # the site's own development score of the timings
    assert [shape["timing"]["median_us"] for shape in early["shapes"]] == [
        shape["timing"]["median_us"] for shape in streamed["provisional"]["shapes"]]


def test_the_api_and_the_page_show_the_provisional_result_and_its_arrival_wakes_waiters(
    running: Evaluation, node_a: Credential, alice: Any, bob: Any, streamed: dict[str, dict[str, Any]]
) -> None:
    before = evaluation_state(running.status, running.provisional_at, running.started_at)
    send_provisional(running, streamed["provisional"], node_a)
    running.refresh_from_db()
    assert evaluation_state(running.status, running.provisional_at, running.started_at) != before
    body = api_evaluation(bob, running)
    assert body["status"] == "running" and body["provisional"] is True and body["provisional_at"]
    assert body["provisional_score"] == running.current_provisional["problem_score"]  # type: ignore[index]
    assert body["score"] is None and body["rank_eligible"] is False and body["report"] is None
    assert body["not_ranked_reason"].startswith("not finished (running): the provisional result")
    assert [shape["shape_id"] for shape in body["shapes"]] == [
        s["shape_id"] for s in streamed["provisional"]["shapes"]
    ]
    assert body["provisional_report"]["log"] == ""  # bob may not read alice's log
    page = Client().get(f"/submissions/{running.submission_id}/").content.decode()
    assert "data-provisional-report" in page and "Provisional result" in page
    status = Client().get(f"/submissions/{running.submission_id}/status", HTTP_HX_REQUEST="true")
    assert status.headers.get("HX-Refresh") == "true"  # the page shows no provisional result yet: reload
    shown = Client().get(f"/submissions/{running.submission_id}/status?provisional={running.pk}",
                         HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in shown.headers and "data-provisional" in shown.content.decode()


def test_the_final_result_replaces_the_provisional_one(running: Evaluation, node_a: Credential, alice: Any,
                                                       streamed: dict[str, dict[str, Any]],
                                                       django_capture_on_commit_callbacks: Any) -> None:
    send_provisional(running, streamed["provisional"], node_a)
    with django_capture_on_commit_callbacks(execute=True):
        stored = tasks.store_result(signed(SITE_RESULT_TASK, final_body(running, streamed["report"]), node_a))
    assert stored == "stored passed"
    running.refresh_from_db()
    assert running.provisional_report is None and running.current_provisional is None
    assert running.report is not None and running.report["witnessed"] is True and running.rank_eligible
    assert RankingEntry.objects.filter(evaluation=running).exists()  # the development ranking (cpu)
    body = api_evaluation(alice, running)
    assert (
        body["provisional"] is False and body["provisional_report"] is None and body["score"] == running.score
    )
    assert (
        send_provisional(running, streamed["provisional"], node_a) == "ignored: passed"
    )  # too late: changes nothing


def test_an_unauthenticated_provisional_result_is_refused(running: Evaluation,
                                                          streamed: dict[str, dict[str, Any]]) -> None:
    assert tasks.store_provisional(provisional_body(running, streamed["provisional"])) == "refused: unsigned"
    assert running.current_provisional is None
    assert_not_ranked(running)


def test_a_provisional_result_from_a_runner_that_did_not_claim_the_job_is_ignored(
        running: Evaluation, node_b: Credential, streamed: dict[str, dict[str, Any]]) -> None:
    as_a = send_provisional(running, streamed["provisional"], node_b)
    assert as_a == "refused: wrong node"
    assert send_provisional(running, streamed["provisional"], node_b, runner="node-b:cpu") == (
        f"ignored: claimed by {RUNNER}, not node-b:cpu")
    running.refresh_from_db()
    assert running.current_provisional is None


def test_a_provisional_result_the_site_would_refuse_is_not_stored(
    running: Evaluation, node_a: Credential, streamed: dict[str, dict[str, Any]]
) -> None:
    forged = {**streamed["provisional"], "problem_score": 7.5}
    assert send_provisional(running, forged, node_a).startswith("ignored: the site refuses it")
    running.refresh_from_db()
    assert running.current_provisional is None


def test_a_provisional_result_of_an_earlier_attempt_is_not_shown(running: Evaluation, node_a: Credential,
                                                                 streamed: dict[str, dict[str, Any]]) -> None:
    send_provisional(running, streamed["provisional"], node_a)
    Evaluation.objects.filter(pk=running.pk).update(started_at=timezone.now())  # a later attempt started
    running.refresh_from_db()
    assert running.provisional_report is not None and running.current_provisional is None
