"""Quotas and their refunds, idempotent retries, and batches, through the API.

The cast (tests/conftest.py): alice submits with her token and runs into her quotas; bob's quota
is his own and never moves when alice's does.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from leaderboard.models import Evaluation, Submission
from solboard_common.protocol import gpu_queue
from tests.leaderboard.api_support import alice_api, bob_api, catalogue, finish, submit_body
from tests.runner_helpers import messages_on

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "bob_api", "catalogue"]


def create(client: APIClient, key: str | None = None, **overrides: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/submissions", submit_body(**overrides), format="json", **headers)


def left(client: APIClient) -> tuple[int, int]:
    """(queued slots left, vector_add-on-cpu evaluations left today)."""
    quota = client.get("/api/quota").json()
    daily = next((row for row in quota["daily_per_problem"]["used"]
                  if (row["problem"], row["gpu_type"]) == ("vector_add", "cpu")), None)
    return quota["queued"]["left"], daily["left"] if daily else quota["daily_per_problem"][
        "limit_by_gpu_type"
    ]["cpu"]


def test_the_queued_quota_refuses_with_429_retry_after_and_the_quota(
    alice_api: APIClient, settings: Any
) -> None:
    settings.SOLBOARD_QUOTA_MAX_QUEUED = 2
    assert [create(alice_api).status_code for _ in range(2)] == [201, 201]
    refused = create(alice_api)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "quota_exceeded" and int(refused["Retry-After"]) == error["retry_after"] > 0
    assert error["quota"] == {"kind": "queued", "used": 2, "limit": 2}
    assert Submission.objects.count() == 2


def test_the_daily_quota_is_per_problem_and_gpu_type_and_says_when_it_resets(
        alice_api: APIClient, bob_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_DAILY_PER_PROBLEM = 1
    assert create(alice_api).status_code == 201
    refused = create(alice_api)
    assert refused.status_code == 429
    quota = refused.json()["error"]["quota"]
    assert (quota["kind"], quota["problem"], quota["gpu_type"], quota["used"]) == (
        "daily",
        "vector_add",
        "cpu",
        1,
    )
    assert 0 < int(refused["Retry-After"]) <= 86400 and quota["resets_at"].endswith("T00:00:00+00:00")
    assert create(bob_api).status_code == 201  # bob's quota is his own


def test_a_per_gpu_type_limit_overrides_the_default(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_DAILY_BY_GPU = {"cpu": 1}
    assert create(alice_api).status_code == 201
    assert create(alice_api).json()["error"]["quota"]["limit"] == 1


def test_cancelled_while_queued_and_infrastructure_faults_give_the_quota_back(
        alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_DAILY_PER_PROBLEM = 10
    assert left(alice_api) == (32, 10)
    ids = [create(alice_api).json()["id"] for _ in range(4)]
    assert left(alice_api) == (28, 6)
    alice_api.post(f"/api/submissions/{ids[0]}/cancel", {}, format="json")
    lost = Evaluation.objects.get(submission_id=ids[1])
    finish(lost, "error", started=True, message="gave up after 3 attempts; last: runner lost")
    assert left(alice_api) == (30, 8)  # both given back


def test_a_kernel_that_fails_on_its_own_merits_keeps_its_charge(alice_api: APIClient) -> None:
    ids = [create(alice_api).json()["id"] for _ in range(4)]
    finish(Evaluation.objects.get(submission_id=ids[0]), "failed", evaluator_status="INCORRECT_NUMERICAL")
    finish(
        Evaluation.objects.get(submission_id=ids[1]), "error", started=True, evaluator_status="COMPILE_ERROR"
    )
    finish(Evaluation.objects.get(submission_id=ids[2]), "timeout", evaluator_status="TIMEOUT")
    running = Evaluation.objects.get(submission_id=ids[3])
    running.transition("running")
    alice_api.post(f"/api/submissions/{ids[3]}/cancel", {}, format="json")  # cancelled after it started
    queued_left, daily_left = left(alice_api)
    assert (queued_left, daily_left) == (32, 196)


def test_a_retry_with_the_same_key_returns_the_original_and_charges_nothing(
        alice_api: APIClient, broker: str, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = create(alice_api, key="run-42")
        retry = create(alice_api, key="run-42")
    assert (first.status_code, retry.status_code) == (201, 201)
    assert retry.json()["id"] == first.json()["id"] and retry["Idempotent-Replayed"] == "true"
    assert Submission.objects.count() == 1 and Evaluation.objects.count() == 1
    assert len(messages_on(broker, gpu_queue("cpu"))) == 1
    assert left(alice_api)[1] == 199


def test_the_same_key_with_a_different_body_is_a_409(alice_api: APIClient) -> None:
    create(alice_api, key="run-42")
    conflict = create(alice_api, key="run-42", mode="ranked")
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "idempotency_conflict"
    assert Submission.objects.count() == 1


def test_keys_are_per_user(alice_api: APIClient, bob_api: APIClient) -> None:
    assert create(alice_api, key="k").json()["id"] != create(bob_api, key="k").json()["id"]


def test_an_empty_or_overlong_key_is_refused(alice_api: APIClient) -> None:
    for key in (" ", "k" * 256):
        response = create(alice_api, key=key)
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_idempotency_key"


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
    reason="the in-memory SQLite test database (shared cache) refuses a second writer instead "
    "of waiting; PostgreSQL (CI, production) runs this",
)
def test_two_concurrent_retries_create_one_submission(alice: Any, catalogue: None) -> None:
    from tests.leaderboard.api_support import client_for

    client_a, client_b = client_for(alice), client_for(alice)
    answers: list[int] = []

    def send(client: APIClient) -> None:
        try:
            answers.append(create(client, key="race").json()["id"])
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(client,)) for client in (client_a, client_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 2 and answers[0] == answers[1]
    assert Submission.objects.count() == 1


def test_a_batch_validates_each_item_on_its_own(alice_api: APIClient) -> None:
    items = [
        submit_body(),
        submit_body(problem="nope"),
        submit_body(source="def k(:\n"),
        submit_body(mode="ranked"),
    ]
    response = alice_api.post("/api/submissions/batch", {"submissions": items}, format="json")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [item["ok"] for item in results] == [True, False, False, True]
    assert [item.get("error", {}).get("code") for item in results] == [
        None,
        "unknown_problem",
        "syntax_error",
        None,
    ]
    assert Submission.objects.count() == 2


def test_a_batch_stops_charging_at_the_quota(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_QUOTA_MAX_QUEUED = 2
    response = alice_api.post("/api/submissions/batch", {"submissions": [submit_body()] * 3}, format="json")
    assert [item.get("error", {}).get("code") for item in response.json()["results"]] == [
        None,
        None,
        "quota_exceeded",
    ]


def test_a_batch_holds_at_most_16(alice_api: APIClient) -> None:
    response = alice_api.post("/api/submissions/batch", {"submissions": [submit_body()] * 17}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "batch_too_large"
    assert Submission.objects.count() == 0


def test_a_batch_retried_with_its_key_is_replayed(alice_api: APIClient) -> None:
    body = {"submissions": [submit_body(), submit_body(problem="nope")]}
    first = alice_api.post("/api/submissions/batch", body, format="json", HTTP_IDEMPOTENCY_KEY="b1")
    again = alice_api.post("/api/submissions/batch", body, format="json", HTTP_IDEMPOTENCY_KEY="b1")
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Submission.objects.count() == 1
