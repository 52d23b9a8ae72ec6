"""Password guessing is throttled (django-axes): the web login form and HTTP Basic on
``POST /api/tokens`` refuse a locked-out address or username, the right password included, with a
429 and ``Retry-After``; API tokens keep working. Token creation has its own hourly limit.

The cast (tests/conftest.py): alice's password is guessed; bob logs in from another address.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from leaderboard.models import ApiToken
from tests.leaderboard.api_support import client_for

pytestmark = pytest.mark.django_db
LIMIT = 10  # SOLBOARD_LOGIN_FAILURE_LIMIT's default
RIGHT = "alice-password-1"


@pytest.fixture(autouse=True)
def fast_hashing(settings: Any) -> None:
    """Dozens of password checks per test: a fast hasher (set before the cast's users are made)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def log_in(password: str, username: str = "alice", address: str = "203.0.113.7", **headers: Any) -> Any:
    client = Client(REMOTE_ADDR=address)
    return client, client.post("/accounts/login/", {"username": username, "password": password}, **headers)


def basic(password: str, username: str = "alice", address: str = "203.0.113.7", **headers: Any) -> Any:
    client = APIClient(REMOTE_ADDR=address)
    pair = base64.b64encode(f"{username}:{password}".encode()).decode()
    return client.post(
        "/api/tokens", {"name": "cli"}, format="json", HTTP_AUTHORIZATION=f"Basic {pair}", **headers
    )


def test_the_login_form_locks_out_after_the_limit_and_refuses_even_the_right_password(alice: Any) -> None:
    for attempt in range(LIMIT - 1):
        _, response = log_in(f"wrong-{attempt}")
        assert response.status_code == 200  # the form again, "please enter a correct username and password"
    _, response = log_in("wrong-last")
    assert response.status_code == 429 and int(response["Retry-After"]) == 15 * 60
    client, response = log_in(RIGHT)
    assert response.status_code == 429 and "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_lockout_of_one_address_and_user_leaves_others_alone(alice: Any, bob: Any) -> None:
    for attempt in range(LIMIT):
        log_in(f"wrong-{attempt}")
    _, response = log_in("bob-password-1", username="bob", address="198.51.100.9")
    assert response.status_code == 302  # logged in


def test_many_addresses_guessing_one_user_lock_that_user(alice: Any) -> None:
    for attempt in range(LIMIT):
        log_in(f"wrong-{attempt}", address=f"198.51.100.{attempt + 1}")
    _, response = log_in(RIGHT, address="198.51.100.200")
    assert response.status_code == 429


def test_a_forged_forwarded_for_header_does_not_reset_the_count(alice: Any, bob: Any) -> None:
    for attempt in range(LIMIT):
        log_in(f"wrong-{attempt}", username=f"nobody{attempt}", HTTP_X_FORWARDED_FOR=f"192.0.2.{attempt}")
    _, response = log_in("bob-password-1", username="bob", HTTP_X_FORWARDED_FOR="192.0.2.250")
    assert response.status_code == 429  # the address is REMOTE_ADDR: no proxy is trusted by default


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_clients(
    alice: Any, bob: Any, settings: Any
) -> None:
    settings.SOLBOARD_TRUSTED_PROXIES = 1
    for attempt in range(LIMIT):
        log_in(f"wrong-{attempt}", username=f"nobody{attempt}", address="10.0.0.2",
               HTTP_X_FORWARDED_FOR="spoofed, 198.51.100.66")
    _, other = log_in(
        "bob-password-1", username="bob", address="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.67"
    )
    assert other.status_code == 302  # another client behind the same proxy is not locked out
    _, same = log_in(
        "bob-password-1", username="bob", address="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.66"
    )
    assert same.status_code == 429


def test_http_basic_on_the_token_endpoint_locks_out_with_a_429_and_retry_after(
    alice: Any, problems: Any
) -> None:
    for attempt in range(LIMIT - 1):
        response = basic(f"wrong-{attempt}")
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_token"
    last = basic("wrong-last")
    assert last.status_code == 429 and last.json()["error"]["code"] == "login_locked"
    assert int(last["Retry-After"]) == 15 * 60
    right = basic(RIGHT)
    assert right.status_code == 429 and right.json()["error"]["retry_after"] == 15 * 60
    assert not ApiToken.objects.filter(user=alice).exists()
    token_client = client_for(alice)  # a token is not a password: it still works
    assert token_client.get("/api/tokens").status_code == 200


def test_a_successful_login_clears_the_count(alice: Any) -> None:
    for attempt in range(LIMIT - 1):
        log_in(f"wrong-{attempt}")
    assert log_in(RIGHT)[1].status_code == 302
    for attempt in range(LIMIT - 1):
        log_in(f"again-{attempt}")
    _, response = log_in(RIGHT)
    assert response.status_code == 302


def test_token_creation_has_an_hourly_limit(alice: Any, settings: Any) -> None:
    settings.SOLBOARD_TOKENS_PER_HOUR = 3
    client = client_for(alice)
    for _ in range(3):
        assert client.post("/api/tokens", {"name": "x"}, format="json").status_code == 201
    refused = client.post("/api/tokens", {"name": "x"}, format="json")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert ApiToken.objects.filter(user=alice).count() == 4  # client_for's own token and three
