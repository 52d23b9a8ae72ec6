"""Webhooks: a token's callback URL gets each terminal status, signed with the token's secret, sent
by the site worker's task (queued on ``site`` after commit), retried with backoff, and never to
the site's own network in production. A local HTTP receiver plays the agent's endpoint.

The cast (tests/conftest.py): alice's agent token names the callback; bob's token has none.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.utils import timezone

from leaderboard.api.tasks import deliver_webhook
from leaderboard.api.webhooks import attempt, backoff_seconds, resend_due, sign, verify
from leaderboard.models import ApiToken, Evaluation, WebhookDelivery
from leaderboard.models.tokens import AgentInfo
from solboard_common.protocol import SITE_QUEUE
from tests.leaderboard.api_support import catalogue, client_for, finish, submit_body
from tests.runner_helpers import messages_on

pytestmark = pytest.mark.django_db
__all__ = ["catalogue"]


class Receiver:
    """Records each POST; answers with the next status of ``answers`` (then 200)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[int] = []


@pytest.fixture
def receiver() -> Iterator[tuple[str, Receiver]]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append((dict(self.headers), body))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", state
    server.shutdown()
    server.server_close()


def submitted_with_callback(alice: Any, url: str) -> tuple[Evaluation, ApiToken]:
    client = client_for(alice, agent=AgentInfo("agent"), callback_url=url)
    submission_id = client.post("/api/submissions", submit_body(), format="json").json()["id"]
    evaluation = Evaluation.objects.get(submission_id=submission_id)
    return evaluation, evaluation.submission.origin.token


def test_a_terminal_status_owes_one_delivery_queued_for_the_site_worker(
        alice: Any, catalogue: None, broker: str, receiver: tuple[str, Receiver],
        django_capture_on_commit_callbacks: Any) -> None:
    url, _ = receiver
    evaluation, _token = submitted_with_callback(alice, url)
    with django_capture_on_commit_callbacks(execute=True):
        finish(evaluation, "failed", message="wrong answer", evaluator_status="INCORRECT_NUMERICAL")
    [delivery] = WebhookDelivery.objects.all()
    assert delivery.state == "pending" and delivery.payload["status"] == "failed"
    assert delivery.payload["evaluation_id"] == evaluation.pk
    assert messages_on(broker, SITE_QUEUE) == [delivery.pk]


def test_the_payload_links_are_absolute_on_the_sites_address(alice: Any, catalogue: None, settings: Any,
                                                             receiver: tuple[str, Receiver],
                                                             django_capture_on_commit_callbacks: Any) -> None:
    settings.SITE_URL = "https://solboard.example.org"
    evaluation, _token = submitted_with_callback(alice, receiver[0])
    with django_capture_on_commit_callbacks(execute=True):
        finish(evaluation, "failed", message="wrong answer", evaluator_status="INCORRECT_NUMERICAL")
    payload = WebhookDelivery.objects.get().payload
    pk = evaluation.submission_id
    assert payload["url"] == f"https://solboard.example.org/api/submissions/{pk}"
    assert payload["report_url"] == f"https://solboard.example.org/submissions/{pk}/"


def test_the_delivery_is_signed_with_the_tokens_secret(alice: Any, catalogue: None,
                                                        receiver: tuple[str, Receiver]) -> None:
    url, state = receiver
    evaluation, token = submitted_with_callback(alice, url)
    finish(evaluation, "passed", score=0.5, report={"witnessed": False, "shapes": []})
    assert attempt(WebhookDelivery.objects.get().pk) is None
    [(headers, body)] = state.received
    assert verify(token.webhook_secret, body, headers["X-Solboard-Signature"])
    assert not verify("whsec_someone-else", body, headers["X-Solboard-Signature"])
    assert not verify(token.webhook_secret, body + b" ", headers["X-Solboard-Signature"])
    payload = json.loads(body)
    assert (payload["status"], payload["provisional"], payload["submission_id"]) == (
        "passed", False, evaluation.submission_id)  # a test run: final, never provisional
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.response_status, delivery.attempts) == ("delivered", 200, 1)


def test_an_old_signature_is_refused_by_the_receiver_check() -> None:
    body = b'{"x": 1}'
    header = sign("whsec_k", body, 1_000_000)
    assert verify("whsec_k", body, header, now=1_000_100)
    assert not verify("whsec_k", body, header, now=1_000_000 + 301)


def test_a_failed_delivery_is_retried_with_backoff_then_delivered(
        alice: Any, catalogue: None, broker: str, receiver: tuple[str, Receiver]) -> None:
    url, state = receiver
    state.answers = [500, 503]
    evaluation, _ = submitted_with_callback(alice, url)
    finish(evaluation, "cancelled")
    delivery = WebhookDelivery.objects.get()
    assert deliver_webhook(delivery.pk) == f"retry in {backoff_seconds(1)}s"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_error) == ("pending", 1, "HTTP 500")
    assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=backoff_seconds(1) - 2)
    assert messages_on(broker, SITE_QUEUE) == [delivery.pk]  # the retry, with its countdown
    assert attempt(delivery.pk) == backoff_seconds(2) == 2 * backoff_seconds(1)
    assert attempt(delivery.pk) is None
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, len(state.received)) == ("delivered", 3, 3)


def test_a_delivery_gives_up_after_the_last_attempt(alice: Any, catalogue: None, settings: Any,
                                                    receiver: tuple[str, Receiver]) -> None:
    settings.SOLBOARD_WEBHOOK_MAX_ATTEMPTS = 2
    url, state = receiver
    state.answers = [500, 500, 500]
    evaluation, _ = submitted_with_callback(alice, url)
    finish(evaluation, "failed")
    pk = WebhookDelivery.objects.get().pk
    assert attempt(pk) is not None and attempt(pk) is None
    assert WebhookDelivery.objects.get().state == "failed" and len(state.received) == 2
    assert attempt(pk) is None and len(state.received) == 2  # nothing more is sent


def test_a_callback_into_the_sites_own_network_is_refused_in_production(
        alice: Any, catalogue: None, settings: Any, receiver: tuple[str, Receiver]) -> None:
    settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE = False
    url, state = receiver
    evaluation, _ = submitted_with_callback(alice, url)
    finish(evaluation, "failed")
    attempt(WebhookDelivery.objects.get().pk)
    delivery = WebhookDelivery.objects.get()
    assert state.received == [] and "not a public address" in delivery.last_error


def test_submissions_without_a_callback_owe_nothing(bob: Any, catalogue: None) -> None:
    client = client_for(bob)
    submission_id = client.post("/api/submissions", submit_body(), format="json").json()["id"]
    finish(Evaluation.objects.get(submission_id=submission_id), "failed")
    assert not WebhookDelivery.objects.exists()


def test_due_deliveries_are_queued_again_by_the_resend_command(
        alice: Any, catalogue: None, broker: str, receiver: tuple[str, Receiver]) -> None:
    url, _ = receiver
    evaluation, _ = submitted_with_callback(alice, url)
    finish(evaluation, "failed")
    pk = WebhookDelivery.objects.get().pk
    messages_on(broker, SITE_QUEUE)
    assert resend_due() == 1 and messages_on(broker, SITE_QUEUE) == [pk]
