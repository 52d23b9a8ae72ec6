"""``POST /api/submissions/batch``: up to 16 submissions, each checked and charged on its own.

Every item is checked first, its PTX/CUDA built, with no transaction open; then one short
transaction, serialised on the user's row, checks the idempotency key again and saves each item in
a savepoint of its own (its quota checked there). A batch gets one compile limit's worth of
compile time in all: native items past it are refused, to be sent again in another batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from evaluator.vocabulary import NATIVE_LANGUAGES
from leaderboard.api import creation, quotas
from leaderboard.api import serializers as s
from leaderboard.api.errors import ApiError, as_api_error
from leaderboard.models import ApiToken, IdempotencyRecord, Submission
from leaderboard.submissions import CheckedSubmission
from leaderboard.throttling import RateLimit

#: Dry runs and batch items per user per hour: each costs the site a check (and maybe a compile).
CHECKS = RateLimit("checks", "SOLBOARD_CHECKS_PER_HOUR", 3600)


@dataclass
class Item:
    index: int
    request: creation.SubmitRequest | None = None
    checked: CheckedSubmission | None = None
    error: dict[str, Any] | None = None


def _refused(index: int, exc: Exception) -> Item:
    error = as_api_error(exc)
    if error is None:  # a bug still surfaces as a 500
        raise exc
    return Item(index, error=error.body()["error"])


def _check_item(user: Any, index: int, raw: dict[str, Any], compile_deadline: float) -> Item:
    serializer = s.SubmitSerializer(data=raw)
    try:
        serializer.is_valid(raise_exception=True)
        request = creation.SubmitRequest.from_validated(serializer.validated_data)
        if request.language in NATIVE_LANGUAGES and time.monotonic() > compile_deadline:
            raise ApiError(
                "compile_busy",
                "this batch has used its compile time; send the rest in another batch",
                "source",
                headers={"Retry-After": "1"},
                retry_after=1,
            )
        return Item(index, request, creation.check(user, request))
    except Exception as exc:  # each item answers for itself
        return _refused(index, exc)


def _save_item(user: Any, token: ApiToken | None, item: Item,
               present: Callable[[Submission], dict[str, Any]]) -> dict[str, Any]:
    if item.error is None and item.request is not None and item.checked is not None:
        try:
            submission = creation.save_item(user, token, item.request, item.checked)
            return {"index": item.index, "ok": True, "submission": present(submission)}
        except Exception as exc:  # a spent quota refuses this item only
            item = _refused(item.index, exc)
    return {"index": item.index, "ok": False, "error": item.error}


def create_batch(
    user: Any,
    token: ApiToken | None,
    raw_items: list[dict[str, Any]],
    key: str | None,
    fingerprint: str,
    present: Callable[[Submission], dict[str, Any]],
) -> tuple[dict[str, Any], bool]:
    """(body, replayed): the per-item results, or the stored answer of an earlier identical request."""
    record = creation.previous_answer(user, key, "batch", fingerprint)
    if record is not None:
        return record.response, True
    CHECKS.charge(user.pk, len(raw_items))
    deadline = time.monotonic() + float(settings.SOLBOARD_COMPILE_SECONDS)
    items = [_check_item(user, index, raw, deadline) for index, raw in enumerate(raw_items)]
    with transaction.atomic():
        quotas.lock_user(user)
        record = creation.previous_answer(user, key, "batch", fingerprint)
        if record is not None:
            return record.response, True
        body = {"results": [_save_item(user, token, item, present) for item in items]}
        if key is not None:
            IdempotencyRecord.objects.create(user=user, key=key, endpoint="batch", request_sha256=fingerprint,
                                             status_code=200, response=body)
    return body, False
