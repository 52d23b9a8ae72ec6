"""Limits on what one API request may cost: JSON nesting and value counts (400 with a code, never a
500; `leaderboard/api/parsers.py`), on the real catalogue.

The cast (tests/conftest.py): alice submits with her token.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from evaluator.ptx.toolchain import find_tool
from tests.leaderboard.api_support import alice_api, catalogue, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "catalogue"]  # fixtures used by name
DEEP = 200_000


def post_raw(client: APIClient, path: str, body: str) -> Any:
    return client.generic("POST", path, body, content_type="application/json")


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


@pytest.mark.parametrize("path", ["/api/submissions", "/api/submissions/validate", "/api/submissions/batch",
                                  "/api/tokens"])
def test_a_body_nested_200000_deep_is_a_400_that_names_the_limit(alice_api: APIClient, path: str) -> None:
    body = json.dumps(submit_body())[:-1] + ', "launch_spec": ' + "[" * DEEP + "]" * DEEP + "}"
    response = post_raw(alice_api, path, body)
    assert response.status_code == 400, response.content[:300]
    assert (error_of(response)["code"], error_of(response)["limit"]) == ("json_too_deep", 32)


def test_a_body_just_deeper_than_the_limit_is_refused_and_one_at_it_is_read(alice_api: APIClient) -> None:
    def nested(depth: int) -> str:  # the body itself is level 1
        return json.dumps(submit_body())[:-1] + ', "extra": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    assert error_of(post_raw(alice_api, "/api/submissions/validate", nested(33)))["code"] == "json_too_deep"
    assert post_raw(alice_api, "/api/submissions/validate", nested(32)).status_code == 200


def test_a_body_of_400000_small_values_is_a_400(alice_api: APIClient) -> None:
    body = json.dumps(submit_body(gpu_types=[0] * 400_000), separators=(",", ":"))  # under the size limit
    response = post_raw(alice_api, "/api/submissions", body)
    assert response.status_code == 400
    assert error_of(response)["code"] == "json_too_many_values"


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.parametrize(
    "spec", ["x = " + "[" * DEEP + "]" * DEEP, "x = " + "{a=" * 20_000 + "1" + "}" * 20_000]
)
def test_a_launch_spec_nested_200000_deep_is_an_invalid_launch_spec(alice_api: APIClient, spec: str) -> None:
    body = submit_body(language="ptx", gpu_types=["h100"], source=".version 8.0\n", launch_spec=spec)
    for path in ("/api/submissions/validate", "/api/submissions"):
        response = alice_api.post(path, body, format="json")
        assert response.status_code == 400, response.content[:300]
        assert error_of(response)["code"] == "invalid_launch_spec"


def test_fields_a_client_may_not_set_are_ignored(alice_api: APIClient, bob: Any) -> None:
    """Mass assignment: a create that names an owner, a score, a status or publicity sets none of them."""
    from leaderboard.models import Submission

    body = submit_body(
        user="bob",
        user_id=bob.pk,
        public=True,
        score=1.0,
        status="passed",
        rank_eligible=True,
        evaluations=[{"status": "passed", "score": 1.0}],
    )
    response = alice_api.post("/api/submissions", body, format="json")
    assert response.status_code == 201, response.json()
    submission = Submission.objects.get(pk=response.json()["id"])
    assert (submission.user.username, submission.public) == ("alice", False)
    assert [(e.status, e.score, e.rank_eligible) for e in submission.evaluations.all()] == [
        ("queued", None, False)
    ]


def test_a_session_write_to_the_api_needs_the_csrf_token(alice: Any, catalogue: None) -> None:
    """A page elsewhere cannot make a signed-in browser submit: no CSRF token, no write (403), and a
    form-encoded body is not even read (415)."""
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    as_json = browser.post("/api/submissions", json.dumps(submit_body()), content_type="application/json")
    assert as_json.status_code == 403 and error_of(as_json)["code"] == "permission_denied"
    as_form = browser.post("/api/submissions", {"problem": "vector_add"})
    assert as_form.status_code in (403, 415)


def test_a_method_override_header_or_field_is_not_honoured(alice: Any, catalogue: None) -> None:
    from leaderboard.models import ApiToken
    from tests.leaderboard.api_support import client_for

    client = client_for(alice)
    spare = client.post("/api/tokens", {"name": "spare"}, format="json").json()
    for override in ({"HTTP_X_HTTP_METHOD_OVERRIDE": "DELETE"}, {"HTTP_X_METHOD_OVERRIDE": "DELETE"}):
        response = client.post(f"/api/tokens/{spare['id']}", {"_method": "DELETE"}, format="json", **override)
        assert response.status_code == 405
    assert ApiToken.objects.get(pk=spare["id"]).revoked_at is None
