"""API tokens: printed once by create_api_token, stored only as a hash, revocable."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from leaderboard.models import ApiToken
from leaderboard.models.tokens import hash_token

pytestmark = pytest.mark.django_db


def create_token(*args: str) -> str:
    out = StringIO()
    call_command("create_api_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_create_api_token_prints_a_token_that_authenticates_and_is_stored_hashed(alice: Any) -> None:
    plain = create_token("alice", "--name", "laptop")
    token = ApiToken.objects.get(user=alice)
    assert ApiToken.authenticate(plain) == alice
    assert token.token_hash == hash_token(plain) and token.name == "laptop"
    assert token.prefix == plain[:8]
    stored_text = " ".join(str(value) for value in ApiToken.objects.values_list().get())
    assert plain not in stored_text


def test_create_api_token_refuses_an_unknown_user_unless_asked_to_create_it(django_user_model: Any) -> None:
    with pytest.raises(CommandError, match="no user 'carol'"):
        create_token("carol")
    plain = create_token("carol", "--create-user")
    assert ApiToken.authenticate(plain) == django_user_model.objects.get(username="carol")


def test_a_wrong_or_revoked_token_authenticates_nobody(alice: Any) -> None:
    token, plain = ApiToken.issue(alice)
    assert ApiToken.authenticate(plain[:-1] + ("A" if plain[-1] != "A" else "B")) is None
    assert ApiToken.authenticate("") is None
    token.revoke()
    assert ApiToken.authenticate(plain) is None


def test_a_token_of_a_deactivated_user_authenticates_nobody(alice: Any) -> None:
    _token, plain = ApiToken.issue(alice)
    alice.is_active = False
    alice.save()
    assert ApiToken.authenticate(plain) is None


def test_using_a_token_records_when_it_was_last_used(alice: Any) -> None:
    token, plain = ApiToken.issue(alice)
    assert token.last_used_at is None
    ApiToken.authenticate(plain)
    token.refresh_from_db()
    assert token.last_used_at is not None
