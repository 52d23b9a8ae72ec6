"""Webhooks: on each terminal status of an evaluation made with a token that names a callback URL,
the site worker POSTs a summary there, signed, retried with exponential backoff.

- When: ``evaluation_finished`` (sent in the transaction that made the status terminal) creates a
  ``WebhookDelivery`` row in that same transaction, so the debt is durable; after commit the
  ``leaderboard.deliver_webhook`` task is queued for the site worker. The web process never POSTs.
- Signature: ``X-Solboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``
  with the token's webhook secret; receivers recompute it and reject old timestamps (replays).
- Retries: any non-2xx answer or network error is retried after 10 s, 20 s, 40 s, ... (capped at
  one hour) up to ``SOLBOARD_WEBHOOK_MAX_ATTEMPTS``; ``manage.py deliver_webhooks`` resends what is
  due if a queued retry was lost with its broker.
- Addresses (``callbacks.py``): unless ``SOLBOARD_WEBHOOK_ALLOW_PRIVATE`` (on with DEBUG), a URL
  whose host resolves to a loopback, private, link-local, multicast or reserved address is refused
  when the token is created and at every delivery; the POST connects to the address that was
  checked (no second lookup: DNS rebinding gains nothing), follows no redirect, and has one
  deadline for all of it.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.dispatch import receiver
from django.utils import timezone

from leaderboard.api.callbacks import RefusedCallback, check_url, parse_url, post_pinned
from leaderboard.api.presenters import is_provisional, not_ranked_reason
from leaderboard.audience import public_message, public_summary
from leaderboard.models import Evaluation, SubmissionOrigin, WebhookDelivery
from leaderboard.signals import evaluation_finished

log = logging.getLogger(__name__)
TASK_NAME = "leaderboard.deliver_webhook"
FIRST_RETRY_S = 10
MAX_RETRY_S = 3600
#: A claimed delivery is another sender's again this long after its POST's own time limit.
LEASE_MARGIN_S = 30
D = WebhookDelivery.State


def sign(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, body: bytes, header: str, tolerance_s: int = 300, now: float | None = None) -> bool:
    """What a receiver does (and the tests do): recompute, compare in constant time, check age."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((now or time.time()) - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, body, timestamp), header)


def summary(evaluation: Evaluation) -> dict[str, Any]:
    """What anyone may read of the result (leaderboard/audience.py): the payload leaves the site for
    a URL the site does not control; the owner reads the details at ``url`` with their token."""
    submission = evaluation.submission
    facts = (evaluation.status, evaluation.evaluator_status, evaluation.message, evaluation.report)
    return {
        "event": "evaluation.finished",
        "submission_id": submission.pk,
        "evaluation_id": evaluation.pk,
        "problem": submission.problem.name,
        "gpu_type": evaluation.gpu_type.key,
        "mode": evaluation.mode,
        "run_number": evaluation.run_number,
        "status": evaluation.status,
        "evaluator_status": evaluation.evaluator_status,
        "message": public_message(*facts),
        **public_summary(*facts),
        "score": evaluation.score,
        "rank_eligible": evaluation.rank_eligible,
        "provisional": is_provisional(evaluation),
        "not_ranked_reason": not_ranked_reason(evaluation, private=False),
        "finished_at": evaluation.finished_at.isoformat() if evaluation.finished_at else None,
        # Absolute (SITE_URL): the receiver is another program, which cannot resolve a path alone.
        "url": f"{settings.SITE_URL}/api/submissions/{submission.pk}",
        "report_url": f"{settings.SITE_URL}/submissions/{submission.pk}/",
    }


@receiver(evaluation_finished, dispatch_uid="leaderboard.api.webhooks.owe_delivery")
def owe_delivery(sender: Any, evaluation: Evaluation, **kwargs: Any) -> None:
    origin = (
        SubmissionOrigin.objects.filter(submission_id=evaluation.submission_id)
        .select_related("token")
        .first()
    )
    token = origin.token if origin else None
    if token is None or not token.callback_url or not token.active:
        return
    evaluation = Evaluation.objects.select_related("submission__problem", "gpu_type").get(pk=evaluation.pk)
    delivery, created = WebhookDelivery.objects.get_or_create(
        evaluation=evaluation,
        token=token,
        defaults={"url": token.callback_url, "payload": summary(evaluation)},
    )
    if created:
        transaction.on_commit(lambda: queue_delivery(delivery.pk), robust=True)


def queue_delivery(delivery_id: int, countdown: float = 0) -> None:
    from leaderboard.dispatch.enqueue import celery_app

    celery_app().send_task(TASK_NAME, args=[delivery_id], countdown=countdown or None)


def backoff_seconds(attempts: int) -> int:
    return min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** max(0, attempts - 1))


def check_callback_url(url: str) -> None:
    """At token creation: the URL is refused now if a delivery to it would be. With private
    addresses allowed (development) the host need not resolve yet."""
    if settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE:
        parse_url(url)
    else:
        check_url(url, allow_private=False)


def post(delivery: WebhookDelivery) -> int:
    """POST the signed payload to the address checked now; the receiver's status code."""
    target = check_url(delivery.url, allow_private=bool(settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE))
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "solboard-webhooks/1",
               "X-Solboard-Event": "evaluation.finished", "X-Solboard-Delivery": str(delivery.pk),
               "X-Solboard-Signature": sign(delivery.token.webhook_secret, body, int(time.time()))}
    return post_pinned(target, body, headers, float(settings.SOLBOARD_WEBHOOK_TIMEOUT_SECONDS))


def attempt(delivery_id: int) -> float | None:
    """One try. Returns seconds until the next try, or None when there is nothing more to do.

    The delivery is claimed by one conditional UPDATE (``sending_until``, one sender at a time) and
    the POST runs outside any transaction: a slow receiver never holds a database lock."""
    now = timezone.now()
    lease = timedelta(seconds=float(settings.SOLBOARD_WEBHOOK_TIMEOUT_SECONDS) + LEASE_MARGIN_S)
    free = Q(sending_until__isnull=True) | Q(sending_until__lt=now)
    claimed = WebhookDelivery.objects.filter(free, pk=delivery_id, state=D.PENDING).update(
        sending_until=now + lease, attempts=F("attempts") + 1)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("token").get(pk=delivery_id)
    return _record(delivery, _send(delivery))


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None = None
    error: str = ""


def _send(delivery: WebhookDelivery) -> Outcome:
    try:
        status = post(delivery)
    except (OSError, RefusedCallback, http.client.HTTPException, ValueError) as error:
        return Outcome(False, error=f"{type(error).__name__}: {error}"[:2000])
    if 200 <= status < 300:
        return Outcome(True, status)
    if 300 <= status < 400:
        return Outcome(False, status, f"HTTP {status}: redirects are not followed; give the final URL")
    return Outcome(False, status, f"HTTP {status}")


def _record(delivery: WebhookDelivery, outcome: Outcome) -> float | None:
    delivery.sending_until, delivery.response_status = None, outcome.status
    retry_in: float | None = None
    if outcome.delivered:
        delivery.state, delivery.delivered_at, delivery.last_error = D.DELIVERED, timezone.now(), ""
    elif delivery.attempts >= int(settings.SOLBOARD_WEBHOOK_MAX_ATTEMPTS):
        delivery.state, delivery.last_error = D.FAILED, outcome.error
    else:
        delivery.last_error, retry_in = outcome.error, backoff_seconds(delivery.attempts)
        delivery.next_attempt_at = timezone.now() + timedelta(seconds=retry_in)
    delivery.save(update_fields=["sending_until", "response_status", "state", "delivered_at", "last_error",
                                 "next_attempt_at"])
    log.info("webhook %s attempt %s: %s", delivery.pk, delivery.attempts, delivery.state if not retry_in
             else f"retry in {retry_in}s ({delivery.last_error})")
    return retry_in


def resend_due() -> int:
    """Queue every pending delivery whose next try is due (``manage.py deliver_webhooks``)."""
    now = timezone.now()
    due = list(WebhookDelivery.objects.filter(Q(sending_until__isnull=True) | Q(sending_until__lt=now),
                                              state=D.PENDING, next_attempt_at__lte=now)
               .values_list("pk", flat=True))
    for pk in due:
        queue_delivery(pk)
    return len(due)
