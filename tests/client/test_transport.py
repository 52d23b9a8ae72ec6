"""The client's HTTP: a token or a login on every request, JSON both ways, an API refusal as
ApiFailure with the envelope's code, field and Retry-After, and everything the service could not
answer (5xx, no envelope, no server) as ServiceFailure. Against a real local server."""

from __future__ import annotations

import base64
import json
import socket

import pytest

from solboard_client.transport import ApiFailure, Client, ServiceFailure
from tests.client.server import answer, serving


def test_a_request_carries_the_token_and_its_json_body() -> None:
    with serving(answer(201, {"id": 12})) as (url, script):
        body = Client(url + "/", "sb_secret").post("/api/submissions", {"problem": "vector_add"})
    assert body == {"id": 12}
    seen = script.seen[0]
    assert (seen.method, seen.path) == ("POST", "/api/submissions")  # no doubled slash
    assert seen.headers["Authorization"] == "Bearer sb_secret"
    assert seen.headers["Content-Type"] == "application/json" and json.loads(seen.body) == {
        "problem": "vector_add"
    }
    assert seen.headers["User-Agent"].startswith("solboard-cli/")


def test_a_login_is_sent_as_basic_auth_instead_of_the_token() -> None:
    with serving(answer(200, {"token": "sb_new"})) as (url, script):
        Client(url, "sb_old").post("/api/tokens", {}, basic=("alice", "pa:ss"))
    sent = script.seen[0].headers["Authorization"]
    assert sent == "Basic " + base64.b64encode(b"alice:pa:ss").decode()


def test_without_a_token_no_authorization_is_sent() -> None:
    with serving(answer(200, {"problems": []})) as (url, script):
        assert Client(url, None).get("/api/problems") == {"problems": []}
    assert "Authorization" not in script.seen[0].headers and script.seen[0].body == b""


def test_an_api_refusal_keeps_its_code_field_and_retry_after() -> None:
    envelope = {"error": {"code": "quota_exceeded", "message": "10 ranked runs a day", "field": "mode"}}
    with (
        serving(answer(429, envelope, **{"Retry-After": "37"})) as (url, _),
        pytest.raises(ApiFailure) as refused,
    ):
        Client(url, "t").post("/api/submissions", {})
    failure = refused.value
    assert (failure.status, failure.code, failure.field, failure.retry_after) == (
        429,
        "quota_exceeded",
        "mode",
        37,
    )
    assert str(failure) == "quota_exceeded [mode]: 10 ranked runs a day"
    assert failure.details["message"] == "10 ranked runs a day"


def test_a_retry_after_that_is_a_date_is_not_a_number_of_seconds() -> None:
    envelope = {"error": {"code": "throttled", "message": "slow down"}}
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    with (
        serving(answer(429, envelope, **{"Retry-After": date})) as (url, _),
        pytest.raises(ApiFailure) as refused,
    ):
        Client(url, "t").get("/api/")
    assert refused.value.retry_after is None and str(refused.value) == "throttled: slow down"


@pytest.mark.parametrize("status,body", [(500, {"error": {"code": "server_error", "message": "boom"}}),
                                         (502, b"<html>Bad Gateway</html>"), (404, {"detail": "Not found."})])
def test_what_the_service_could_not_answer_is_a_service_failure(status: int, body: object) -> None:
    with serving(answer(status, body)) as (url, _), pytest.raises(ServiceFailure, match=f"answered {status}"):
        Client(url, "t").get("/api/")


def test_an_answer_that_is_not_json_is_kept_as_text() -> None:
    with serving(answer(200, b"plain words")) as (url, _):
        assert Client(url, "t").get("/healthz") == {"text": "plain words"}
    with serving(answer(204)) as (url, _):
        assert Client(url, "t").request("DELETE", "/api/tokens/3").body is None


def test_no_server_is_a_service_failure_that_names_the_server() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ServiceFailure, match=f"127.0.0.1:{port} did not answer"):
        Client(f"http://127.0.0.1:{port}", "t", timeout=2).get("/api/")
