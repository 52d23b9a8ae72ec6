"""The submissions API: auth, create, list own, detail, cancel, re-run, dry run, and every refusal
with its stable error code, on the real catalogue and a private broker.

The cast (tests/conftest.py): alice submits with her token; bob has his own token and may read
alice's reports, never her source; the operator is staff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from evaluator.ptx.toolchain import find_tool
from leaderboard.models import ApiToken, Evaluation, Submission
from leaderboard.models.tokens import AgentInfo
from solboard_common.protocol import gpu_queue
from tests.leaderboard.api_support import (
    VECTOR_ADD,
    alice_api,
    bob_api,
    catalogue,
    client_for,
    finish,
    submit_body,
)
from tests.runner_helpers import messages_on

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "bob_api", "catalogue"]  # fixtures used by name
REPO = Path(__file__).resolve().parents[2]


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message", "field"} <= set(body["error"]), body
    return body["error"]


def create(client: APIClient, **overrides: Any) -> Any:
    return client.post("/api/submissions", submit_body(**overrides), format="json")


def test_it_requires_a_token(catalogue: None) -> None:
    response = APIClient().post("/api/submissions", submit_body(), format="json")
    assert response.status_code == 401
    assert error_of(response)["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_refuses_an_unknown_or_revoked_token(alice: Any, catalogue: None) -> None:
    token, plain = ApiToken.issue(alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer sol_not-a-real-token")
    assert error_of(client.get("/api/submissions"))["code"] == "invalid_token"
    token.revoke()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    response = client.get("/api/submissions")
    assert response.status_code == 401 and error_of(response)["code"] == "invalid_token"


def test_a_program_submits_a_kernel_that_is_saved_and_handed_to_the_broker(
        alice_api: APIClient, broker: str, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = create(alice_api, mode="ranked")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert response["Location"] == f"/api/submissions/{body['id']}"
    assert body["source"] == VECTOR_ADD and body["status"] == "queued"
    [evaluation] = body["evaluations"]
    assert (evaluation["gpu_type"], evaluation["mode"], evaluation["queue_position"]) == (
        "cpu",
        "ranked",
        1,
    )  # 1 = next to start
    assert evaluation["not_ranked_reason"] == "not finished (queued)"
    [job] = messages_on(broker, gpu_queue("cpu"))
    assert job["evaluation_id"] == evaluation["id"]


def test_the_language_follows_the_file_extension_when_not_given(alice_api: APIClient) -> None:
    body = submit_body(filename="kernel.py")
    del body["language"]
    response = alice_api.post("/api/submissions", body, format="json")
    assert response.status_code == 201 and response.json()["language"] == "python"


def test_bob_reads_alices_report_but_never_her_private_source(
    alice_api: APIClient, bob_api: APIClient
) -> None:
    submission_id = create(alice_api).json()["id"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    finish(evaluation, "failed", report={"shapes": [], "witnessed": False, "log": "alice's stdout"})
    mine = alice_api.get(f"/api/submissions/{submission_id}").json()
    theirs = bob_api.get(f"/api/submissions/{submission_id}").json()
    assert mine["source"] == VECTOR_ADD and mine["evaluations"][0]["report"]["log"] == "alice's stdout"
    assert "source" not in theirs and "launch_spec" not in theirs
    assert theirs["evaluations"][0]["report"]["log"] == ""
    assert theirs["evaluations"][0]["status"] == "failed"


def test_the_list_holds_only_the_callers_own_submissions(alice_api: APIClient, bob_api: APIClient) -> None:
    ids = {create(alice_api).json()["id"] for _ in range(3)}
    create(bob_api)
    page = alice_api.get("/api/submissions?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"] is not None
    rest = alice_api.get("/api/submissions?page=2&page_size=2").json()
    assert {row["id"] for row in page["results"] + rest["results"]} == ids
    assert error_of(alice_api.get("/api/submissions?page=0"))["code"] == "invalid"


def test_a_token_with_agent_metadata_labels_the_submissions_made_with_it(alice: Any, catalogue: None) -> None:
    client = client_for(alice, agent=AgentInfo("kernel-agent", "some-llm", "1.2"))
    body = create(client).json()
    assert body["agent"] == {"name": "kernel-agent", "model": "some-llm", "version": "1.2"}
    assert client.get("/api/submissions").json()["results"][0]["agent"]["name"] == "kernel-agent"


def test_cancel_ends_what_is_queued_and_a_second_cancel_is_a_conflict(
        alice_api: APIClient, bob_api: APIClient) -> None:
    submission_id = create(alice_api, gpu_types=["cpu"]).json()["id"]
    assert (
        error_of(bob_api.post(f"/api/submissions/{submission_id}/cancel", {}, format="json"))["code"]
        == "not_found"
    )
    response = alice_api.post(f"/api/submissions/{submission_id}/cancel", {}, format="json")
    assert response.status_code == 200
    assert response.json()["evaluations"][0]["status"] == "cancelled"
    again = alice_api.post(f"/api/submissions/{submission_id}/cancel", {}, format="json")
    assert again.status_code == 409 and error_of(again)["code"] == "not_cancellable"


def test_a_rerun_waits_for_the_first_run_to_end_and_adds_run_two(
        alice_api: APIClient, bob_api: APIClient) -> None:
    submission_id = create(alice_api).json()["id"]
    rerun = f"/api/submissions/{submission_id}/rerun"
    assert error_of(alice_api.post(rerun, {}, format="json"))["code"] == "still_running"
    finish(Evaluation.objects.get(submission_id=submission_id), "failed")
    assert error_of(bob_api.post(rerun, {}, format="json"))["code"] == "not_found"
    refused = alice_api.post(rerun, {"gpu_types": ["h100"]}, format="json")
    assert refused.status_code == 400 and error_of(refused) == {
        **error_of(refused), "code": "unknown_gpu_type", "field": "gpu_types"}
    response = alice_api.post(rerun, {"mode": "ranked"}, format="json")
    assert response.status_code == 201
    runs = [(e["run_number"], e["mode"], e["status"]) for e in response.json()["evaluations"]]
    assert runs == [(1, "test", "failed"), (1, "ranked", "queued")]
    finish(Evaluation.objects.get(submission_id=submission_id, mode="ranked"), "failed")
    again = alice_api.post(rerun, {"mode": "ranked"}, format="json").json()
    assert [e["run_number"] for e in again["evaluations"] if e["mode"] == "ranked"] == [1, 2]


def test_a_dry_run_runs_every_check_and_saves_nothing(alice_api: APIClient, broker: str,
                                                      django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        ok = alice_api.post("/api/submissions/validate", submit_body(), format="json")
        bad = alice_api.post("/api/submissions/validate", submit_body(source="def kernel(:\n"), format="json")
    assert ok.status_code == 200 and ok.json()["ok"] is True and ok.json()["quota"] is None
    assert bad.status_code == 400
    assert error_of(bad)["code"] == "syntax_error" and "line 1" in error_of(bad)["message"]
    assert Submission.objects.count() == 0 and Evaluation.objects.count() == 0
    assert messages_on(broker, gpu_queue("cpu")) == []


REFUSALS = [
    ({"problem": "no_such_problem"}, 400, "unknown_problem", "problem"),
    ({"language": "fortran"}, 400, "unsupported_language", "language"),
    ({"gpu_types": ["tpu9"]}, 400, "unknown_gpu_type", "gpu_types"),
    ({"gpu_types": []}, 400, "invalid", "gpu_types"),
    ({"mode": "fast"}, 400, "invalid_mode", "mode"),
    ({"source": ""}, 400, "invalid_source", "source"),
    ({"source": "x = 1\0"}, 400, "invalid_source", "source"),
    ({"source": "def kernel(:\n"}, 400, "syntax_error", "source"),
    ({"language": "ptx", "gpu_types": ["cpu"]}, 400, "unknown_gpu_type", "gpu_types"),
]


@pytest.mark.parametrize(("overrides", "status", "code", "field"), REFUSALS)
def test_each_refusal_has_its_status_code_and_field(
    alice_api: APIClient, overrides: dict[str, Any], status: int, code: str, field: str
) -> None:
    response = create(alice_api, **overrides)
    assert response.status_code == status, response.json()
    error = error_of(response)
    assert (error["code"], error["field"]) == (code, field)
    assert Submission.objects.count() == 0


def test_a_problem_with_no_cpu_shape_is_refused_on_the_development_device(alice_api: APIClient) -> None:
    from leaderboard.models import Shape

    # an import whose every shape needs a GPU (docs/importing.md) has nothing for the CPU device to run
    Shape.objects.filter(problem__name="vector_add").update(cpu=False)
    response = create(alice_api, gpu_types=["cpu"])
    assert response.status_code == 400, response.json()
    error = error_of(response)
    assert (error["code"], error["field"]) == ("unknown_gpu_type", "gpu_types")
    assert "every shape needs a GPU" in error["message"]
    assert Submission.objects.count() == 0


@pytest.mark.parametrize(("overrides", "field"), [
    ({"source": "x = '\udcff'\n"}, "source"),
    ({"language": "ptx", "launch_spec": "grid = '\ud800'"}, "launch_spec"),
])
def test_a_lone_surrogate_sent_as_a_json_escape_is_a_400_naming_the_field(
        alice_api: APIClient, overrides: dict[str, Any], field: str) -> None:
    body = json.dumps(submit_body(**overrides))  # ASCII JSON: the surrogate travels as \udcff
    response = alice_api.generic("POST", "/api/submissions", body, content_type="application/json")
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["field"] == field and error["code"] in ("invalid_source", "invalid")
    assert "surrogate" in error["message"].lower()
    assert Submission.objects.count() == 0


def test_a_source_over_the_limit_is_a_413_that_states_the_limit(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_MAX_SOURCE_BYTES = 1000
    response = create(alice_api, source="#" * 1001)
    assert response.status_code == 413
    error = error_of(response)
    assert (error["code"], error["limit"], error["size"]) == ("source_too_large", 1000, 1001)
    assert "the limit is 1000 bytes" in error["message"]


def test_a_body_over_the_limit_is_refused_before_it_is_read(alice_api: APIClient, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = create(alice_api, source="#" * 5000)
    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large" and error_of(response)["limit"] == 4096


def test_malformed_requests_get_the_envelope_too(alice_api: APIClient) -> None:
    broken = alice_api.generic("POST", "/api/submissions", "{not json", content_type="application/json")
    assert (broken.status_code, error_of(broken)["code"]) == (400, "malformed_json")
    form = alice_api.post("/api/submissions", {"problem": "vector_add"})  # multipart, not JSON
    assert (form.status_code, error_of(form)["code"]) == (415, "unsupported_media_type")
    put = alice_api.put("/api/submissions/1", {}, format="json")
    assert (put.status_code, error_of(put)["code"]) == (405, "method_not_allowed")
    nowhere = alice_api.get("/api/no-such-endpoint")
    assert (nowhere.status_code, error_of(nowhere)["code"]) == (404, "not_found")
    missing = alice_api.get("/api/submissions/999999")
    assert (missing.status_code, error_of(missing)["code"]) == (404, "not_found")


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")
def test_ptx_that_does_not_assemble_is_a_compile_error_with_line_numbers(alice_api: APIClient) -> None:
    source = (REPO / "examples/ptx/vector_add.ptx").read_text().replace("ret;", "bogus.op %r1;", 1)
    response = create(alice_api, language="ptx", gpu_types=["h100"], source=source)
    assert response.status_code == 400, response.json()
    error = error_of(response)
    assert error["code"] == "compile_error" and "line" in error["message"].lower()


@pytest.mark.parametrize("query", ["page=3303074510548606464", "page=1000001", "page=%C2%B2", "page_size=0",
                                   "page=-1", "page_size=99999999999999999999999"])
def test_a_page_out_of_range_or_not_a_number_is_a_400_never_a_database_error(alice_api: APIClient,
                                                                              query: str) -> None:
    response = alice_api.get(f"/api/submissions?{query}")
    assert response.status_code == 400, response.content
    assert error_of(response)["code"] == "invalid"
    leaderboard = alice_api.get(f"/api/leaderboards/vector_add/cpu?{query}")
    assert leaderboard.status_code == 400, leaderboard.content
