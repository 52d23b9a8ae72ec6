"""The site's door for runner messages: authenticate, then hand the message to its handler.

A message on the ``site`` queue is accepted only when its ``auth`` block (solboard_common/signing.py)
names an active credential, its HMAC is right, its timestamp is within
``SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS`` of the site's clock, its nonce was never seen with that
credential, and every runner name in it belongs to the credential's node. Anything else is
logged, counted (RunnerAuthFailure, in the admin) and dropped: never stored.

The nonce is recorded in the same transaction as the handler's writes, so a handler that fails
on a locked database rolls it back and Celery's retry is not mistaken for a replay.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from leaderboard.dispatch.credentials import candidate_keys
from leaderboard.models import RunnerAuthFailure, RunnerCredential, RunnerMessageNonce
from solboard_common.protocol import node_of_runner
from solboard_common.signing import message_mac, unsigned

log = logging.getLogger("leaderboard.dispatch")
M = TypeVar("M", bound=BaseModel)
_last_purge = 0.0


class AuthFailure(Exception):
    def __init__(self, reason: str, detail: str, credential: RunnerCredential | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.credential = reason, detail, credential


@dataclass(frozen=True)
class Sender:
    """Who sent an authenticated message."""

    credential: RunnerCredential

    @property
    def node(self) -> str:
        return self.credential.node_name


def window_seconds() -> int:
    return int(settings.SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS)


def receive(task: str, payload: Any, model: type[M], handle: Callable[[M], str]) -> str:
    """Authenticate ``payload`` for ``task``, validate it as ``model``, run ``handle``; returns
    what happened (for logs and tests). Database errors propagate (the task retries them)."""
    try:
        with transaction.atomic():
            sender, body = authenticate(task, payload)
            message = model.model_validate(body)
            speaks_as_itself(sender, message)
            return handle(message)
    except AuthFailure as failure:
        count_failure(task, failure)
        log.warning("runner message %s refused: %s", task, failure)
        return f"refused: {failure.reason}"
    except ValidationError as error:
        log.error("malformed %s dropped: %s", task, error)
        return "malformed"


def authenticate(task: str, payload: Any) -> tuple[Sender, dict[str, Any]]:
    if not isinstance(payload, dict):
        raise AuthFailure("malformed", f"a {type(payload).__name__}, not an object")
    body, auth = unsigned(payload)
    if not isinstance(auth, dict):
        raise AuthFailure("unsigned", "the message has no auth block")
    public_id, ts, nonce, mac = (auth.get(key) for key in ("credential", "ts", "nonce", "mac"))
    if not (isinstance(public_id, str) and isinstance(ts, int) and isinstance(nonce, str)
            and isinstance(mac, str) and 16 <= len(nonce) <= 64):
        raise AuthFailure("malformed", "the auth block lacks credential, ts, nonce or mac")
    credential = RunnerCredential.objects.filter(public_id=public_id).first()
    if credential is None:
        raise AuthFailure("unknown credential", f"no credential {public_id[:40]!r}")
    if not _mac_matches(credential, task, body, ts, nonce, mac):
        raise AuthFailure("bad mac", f"the HMAC does not match credential {public_id}", credential)
    if credential.revoked_at is not None:
        raise AuthFailure("revoked", f"credential {public_id} was revoked", credential)
    _check_time(credential, ts)
    _remember_nonce(credential, nonce)
    RunnerCredential.objects.filter(pk=credential.pk).update(
        last_used_at=timezone.now(), messages_accepted=F("messages_accepted") + 1)
    return Sender(credential), body


def _mac_matches(credential: RunnerCredential, task: str, body: dict[str, Any], ts: int, nonce: str,
                 mac: str) -> bool:
    return any(hmac.compare_digest(message_mac(key, task, body, credential.public_id, ts, nonce), mac)
               for key in candidate_keys(credential.public_id))


def _check_time(credential: RunnerCredential, ts: int) -> None:
    skew = time.time() - ts
    if abs(skew) > window_seconds():
        when = "old" if skew > 0 else "in the future"
        raise AuthFailure(
            "stale", f"sent {abs(skew):.0f}s {when}, the window is {window_seconds()}s", credential
        )


def _remember_nonce(credential: RunnerCredential, nonce: str) -> None:
    try:
        with transaction.atomic():
            RunnerMessageNonce.objects.create(credential=credential, nonce=nonce)
    except IntegrityError:
        raise AuthFailure("replay", f"nonce {nonce[:16]}... already used by {credential.public_id}",
                          credential) from None
    purge_nonces()


def purge_nonces(force: bool = False) -> int:
    """Forget nonces whose messages can no longer pass the time check (at most once a minute)."""
    global _last_purge
    now = time.monotonic()
    if not force and now - _last_purge < 60:
        return 0
    _last_purge = now
    cutoff = timezone.now() - timedelta(seconds=2 * window_seconds())
    deleted, _ = RunnerMessageNonce.objects.filter(received_at__lt=cutoff).delete()
    return deleted


def speaks_as_itself(sender: Sender, message: BaseModel) -> None:
    """Every runner name in the message must be the credential's node (``<node>:<slot>``)."""
    names = [getattr(message, "runner", None), getattr(message, "node", None) or None]
    for name in filter(None, names):
        if node_of_runner(str(name)) != sender.node:
            raise AuthFailure("wrong node", f"credential of {sender.node} used to speak as {name!r}",
                              sender.credential)


def count_failure(task: str, failure: AuthFailure) -> None:
    """One counter per reason and credential: an operator sees them in the admin."""
    now, detail = timezone.now(), failure.detail[:500]
    with transaction.atomic():
        row, _ = RunnerAuthFailure.objects.get_or_create(reason=failure.reason, credential=failure.credential)
        RunnerAuthFailure.objects.filter(pk=row.pk).update(
            count=F("count") + 1, last_at=now, last_task=task[:100], last_detail=detail)
