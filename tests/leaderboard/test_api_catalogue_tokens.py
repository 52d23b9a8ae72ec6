"""Tokens managed by their owner, the catalogue (problems, GPU types, t_SOL), leaderboards and
the meta endpoint, through the API.

The cast (tests/conftest.py): alice owns tokens and results; bob may list only his own tokens,
never revoke alice's; anyone, signed in or not, reads the catalogue and the leaderboards.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from rest_framework.test import APIClient

from evaluator.gpu_specs import get_gpu_spec
from evaluator.problems import get_problem
from evaluator.sol import t_sol
from leaderboard.models import ApiToken, Evaluation
from leaderboard.ranking_maintenance import refresh_rankings_for
from tests.leaderboard.api_support import alice_api, bob_api, catalogue, finish, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "bob_api", "catalogue"]


def test_a_token_is_shown_once_and_then_only_by_its_prefix(alice_api: APIClient) -> None:
    created = alice_api.post("/api/tokens", {"name": "ci", "agent_name": "bot", "agent_model": "m",
                                             "agent_version": "3"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith("sol_") and body["prefix"] == body["token"][:8]
    assert ApiToken.authenticate(body["token"]) is not None
    listed = alice_api.get("/api/tokens").json()
    assert all("token" not in row for row in listed)
    assert {row["name"] for row in listed} == {"test", "ci"}


def test_a_token_with_a_callback_gets_a_webhook_secret_once(alice_api: APIClient) -> None:
    body = alice_api.post("/api/tokens", {"callback_url": "https://example.org/hook"}, format="json").json()
    assert body["webhook_secret"].startswith("whsec_")
    assert "webhook_secret" not in alice_api.get("/api/tokens").json()[0]
    refused = alice_api.post("/api/tokens", {"callback_url": "ftp://example.org/x"}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "callback_url"


def test_only_the_owner_revokes_a_token(alice_api: APIClient, bob_api: APIClient) -> None:
    created = alice_api.post("/api/tokens", {"name": "spare"}, format="json").json()
    assert bob_api.delete(f"/api/tokens/{created['id']}").status_code == 404
    assert alice_api.delete(f"/api/tokens/{created['id']}").status_code == 204
    assert ApiToken.authenticate(created["token"]) is None
    assert alice_api.delete(f"/api/tokens/{created['id']}").json()["error"]["code"] == "not_found"


def test_login_trades_a_password_for_a_token(alice: Any, catalogue: None) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"alice:alice-password-1").decode())
    created = client.post("/api/tokens", {"name": "laptop"}, format="json")
    assert created.status_code == 201 and ApiToken.authenticate(created.json()["token"]) == alice
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"alice:wrong").decode())
    assert client.post("/api/tokens", {}, format="json").status_code == 401


def test_the_catalogue_lists_problems_and_a_problem_has_its_sol_per_gpu_type(catalogue: None) -> None:
    client = APIClient()
    names = [row["name"] for row in client.get("/api/problems").json()]
    assert "vector_add" in names and "gemm_bf16" in names
    problem = client.get("/api/problems/gemm_bf16").json()
    assert "ptx" in problem["languages"] and problem["ptx_abi"]
    shape = problem["shapes"][0]
    counts = get_problem("gemm_bf16").counts(shape["axes"])
    expected = t_sol(counts, get_gpu_spec("h100"))
    assert shape["t_sol"]["h100"] == {"t_sol_us": pytest.approx(expected.t_sol_us), "bound": expected.bound}
    assert shape["t_sol"]["cpu"] is None
    assert client.get("/api/problems/nope").json()["error"]["code"] == "not_found"


def test_gpu_types_are_listed_with_their_peaks(catalogue: None) -> None:
    rows = {row["key"]: row for row in APIClient().get("/api/gpu-types").json()}
    assert rows["cpu"]["development_device"] is True and rows["h100"]["arch"] == "sm_90a"


def ranked_result(client: APIClient, score: float) -> int:
    submission_id = client.post("/api/submissions", submit_body(mode="ranked"), format="json").json()["id"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    finish(evaluation, "passed", score=score, rank_eligible=True, report={"witnessed": True, "shapes": []})
    refresh_rankings_for(evaluation)
    return submission_id


def test_the_leaderboard_ranks_eligible_results_best_first_with_pages(
        alice_api: APIClient, bob_api: APIClient) -> None:
    alices, bobs = ranked_result(alice_api, 0.6), ranked_result(bob_api, 0.7)
    page = APIClient().get("/api/leaderboards/vector_add/cpu?page_size=1").json()
    assert (page["count"], page["order"], page["track"]) == (2, "score", "all")
    assert [(row["rank"], row["submission_id"]) for row in page["results"]] == [(1, bobs)]
    second = APIClient().get("/api/leaderboards/vector_add/cpu?page=2&page_size=1").json()
    assert [(row["rank"], row["submission_id"], row["user"]) for row in second["results"]] == [
        (2, alices, "alice")
    ]


def test_a_provisional_result_is_shown_but_never_ranked(alice_api: APIClient) -> None:
    submission_id = alice_api.post("/api/submissions", submit_body(mode="ranked"), format="json").json()["id"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    report = {
        "witnessed": False,
        "shapes": [
            {
                "shape_id": "n1024",
                "status": "PASSED",
                "witness": {"confirmed": False, "message": "below the floor"},
            }
        ],
    }
    finish(evaluation, "passed", score=0.9, rank_eligible=False, report=report)
    refresh_rankings_for(evaluation)
    shown = alice_api.get(f"/api/submissions/{submission_id}").json()["evaluations"][0]
    assert shown["provisional"] is True
    assert shown["not_ranked_reason"] == "provisional: n1024: below the floor"
    assert APIClient().get("/api/leaderboards/vector_add/cpu").json()["count"] == 0


def test_a_test_run_that_passed_is_final_not_provisional(alice_api: APIClient) -> None:
    """No witness runs in test mode, so nothing is left to confirm: the CLI printed "(provisional)"
    beside a finished test run while the report page said "a test run"."""
    submission_id = alice_api.post("/api/submissions", submit_body(), format="json").json()["id"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    finish(evaluation, "passed", report={"witnessed": False, "shapes": []})
    shown = alice_api.get(f"/api/submissions/{submission_id}").json()["evaluations"][0]
    assert (shown["mode"], shown["provisional"]) == ("test", False)
    assert shown["not_ranked_reason"] == "test mode is never ranked: submit with mode=ranked"


def test_leaderboard_refusals(catalogue: None) -> None:
    client = APIClient()
    assert client.get("/api/leaderboards/vector_add/tpu").json()["error"]["code"] == "not_found"
    assert client.get("/api/leaderboards/vector_add/cpu?shape=nope").json()["error"]["field"] == "shape"
    assert client.get("/api/leaderboards/vector_add/cpu?track=best").json()["error"]["code"] == "invalid"


def test_meta_states_the_limits_a_client_waits_by(alice_api: APIClient) -> None:
    meta = alice_api.get("/api/").json()
    assert (meta["max_batch"], meta["max_wait_seconds"], meta["user"]) == (16, 60, "alice")
    assert APIClient().get("/api/").json()["user"] is None


def test_a_number_where_a_string_belongs_is_refused_not_coerced(alice_api: APIClient) -> None:
    response = alice_api.post("/api/tokens", {"agent_version": 0}, format="json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "agent_version"
    assert alice_api.post("/api/submissions", submit_body(problem=7), format="json").status_code == 400
