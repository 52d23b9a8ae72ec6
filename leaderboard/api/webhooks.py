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
- Addresses: unless ``SOLBOARD_WEBHOOK_ALLOW_PRIVATE`` (on with DEBUG), a URL whose host resolves
  to a loopback, private, link-local or reserved address is refused, so a token cannot make the
  site probe its own network.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone

from leaderboard.api.presenters import is_provisional, not_ranked_reason
from leaderboard.models import Evaluation, SubmissionOrigin, WebhookDelivery
from leaderboard.signals import evaluation_finished

log = logging.getLogger(__name__)
TASK_NAME = "leaderboard.deliver_webhook"
FIRST_RETRY_S = 10
MAX_RETRY_S = 3600
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
    submission = evaluation.submission
    return {
        "event": "evaluation.finished", "submission_id": submission.pk, "evaluation_id": evaluation.pk,
        "problem": submission.problem.name, "gpu_type": evaluation.gpu_type.key, "mode": evaluation.mode,
        "run_number": evaluation.run_number, "status": evaluation.status,
        "evaluator_status": evaluation.evaluator_status, "message": evaluation.message[:2000],
        "score": evaluation.score, "rank_eligible": evaluation.rank_eligible,
        "provisional": is_provisional(evaluation), "not_ranked_reason": not_ranked_reason(evaluation),
        "finished_at": evaluation.finished_at.isoformat() if evaluation.finished_at else None,
        # Absolute (SITE_URL): the receiver is another program, which cannot resolve a path alone.
        "url": f"{settings.SITE_URL}/api/submissions/{submission.pk}",
        "report_url": f"{settings.SITE_URL}/submissions/{submission.pk}/",
    }


@receiver(evaluation_finished, dispatch_uid="leaderboard.api.webhooks.owe_delivery")
def owe_delivery(sender: Any, evaluation: Evaluation, **kwargs: Any) -> None:
    origin = SubmissionOrigin.objects.filter(submission_id=evaluation.submission_id).select_related("token").first()
    token = origin.token if origin else None
    if token is None or not token.callback_url or not token.active:
        return
    evaluation = Evaluation.objects.select_related("submission__problem", "gpu_type").get(pk=evaluation.pk)
    delivery, created = WebhookDelivery.objects.get_or_create(
        evaluation=evaluation, token=token, defaults={"url": token.callback_url, "payload": summary(evaluation)})
    if created:
        transaction.on_commit(lambda: queue_delivery(delivery.pk), robust=True)


def queue_delivery(delivery_id: int, countdown: float = 0) -> None:
    from leaderboard.dispatch.enqueue import celery_app

    celery_app().send_task(TASK_NAME, args=[delivery_id], countdown=countdown or None)


def backoff_seconds(attempts: int) -> int:
    return min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** max(0, attempts - 1))


class RefusedAddress(ValueError):
    """The callback URL points into the site's own network."""


def check_address(url: str) -> None:
    if settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE:
        return
    host = urlsplit(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as error:
        raise RefusedAddress(f"{host!r} does not resolve: {error}") from None
    for address in addresses:
        ip = ipaddress.ip_address(str(address).split("%")[0])
        if not ip.is_global:
            raise RefusedAddress(f"{host!r} resolves to {ip}, which is not a public address")


def post(delivery: WebhookDelivery) -> int:
    """POST the signed payload; the receiver's status code (urllib raises for non-2xx)."""
    check_address(delivery.url)
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "solboard-webhooks/1",
               "X-Solboard-Event": "evaluation.finished", "X-Solboard-Delivery": str(delivery.pk),
               "X-Solboard-Signature": sign(delivery.token.webhook_secret, body, int(time.time()))}
    request = urllib.request.Request(delivery.url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=float(settings.SOLBOARD_WEBHOOK_TIMEOUT_SECONDS)) as answer:
        return int(answer.status)


def attempt(delivery_id: int) -> float | None:
    """One try. Returns seconds until the next try, or None when there is nothing more to do."""
    with transaction.atomic():  # the row stays locked during the POST: one sender at a time
        claimed = (WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
                   .filter(pk=delivery_id, state=D.PENDING).select_related("token").first())
        if claimed is None:
            return None
        return _try(claimed)


def _try(claimed: WebhookDelivery) -> float | None:
    claimed.attempts += 1
    try:
        claimed.response_status = post(claimed)
        claimed.state, claimed.delivered_at, claimed.last_error = D.DELIVERED, timezone.now(), ""
    except urllib.error.HTTPError as error:
        claimed.response_status, claimed.last_error = error.code, f"HTTP {error.code}"
    except (OSError, RefusedAddress, ValueError) as error:
        claimed.last_error = f"{type(error).__name__}: {error}"[:2000]
    retry_in: float | None = None
    if claimed.state == D.PENDING:
        if claimed.attempts >= int(settings.SOLBOARD_WEBHOOK_MAX_ATTEMPTS):
            claimed.state = D.FAILED
        else:
            retry_in = backoff_seconds(claimed.attempts)
            claimed.next_attempt_at = timezone.now() + timedelta(seconds=retry_in)
    claimed.save()
    log.info("webhook %s attempt %s: %s", claimed.pk, claimed.attempts, claimed.state if not retry_in
             else f"retry in {retry_in}s ({claimed.last_error})")
    return retry_in


def resend_due() -> int:
    """Queue every pending delivery whose next try is due (``manage.py deliver_webhooks``)."""
    due = list(WebhookDelivery.objects.filter(state=D.PENDING, next_attempt_at__lte=timezone.now())
               .values_list("pk", flat=True))
    for pk in due:
        queue_delivery(pk)
    return len(due)
