"""Webhooks cannot be turned against the site's own network: addresses refused at token creation
and at every delivery, the POST pinned to the address that was checked (DNS rebinding), no
redirect followed, one deadline for the whole request, TLS checked against the URL's host name.

A resolver stub plays the name server (it answers a public address first and 127.0.0.1 next);
real local HTTP and HTTPS servers play the receivers. The cast (tests/conftest.py): alice owns
the token with the callback.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from leaderboard.api.callbacks import RefusedCallback, Target, check_url, post_pinned, refusal
from leaderboard.api.webhooks import attempt
from leaderboard.models import ApiToken, Evaluation, WebhookDelivery
from tests.leaderboard.api_support import alice_api, catalogue, client_for, finish, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "catalogue"]  # fixtures used by name

REFUSED = [
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "ff02::1",
    "ff0e::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "2002:a9fe:a9fe::1",
    "2001:db8::1",
]
PUBLIC = ["8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
REAL_GETADDRINFO = socket.getaddrinfo


class Resolver:
    """A name server stub: each name answers its addresses in turn (the last one repeats); other
    names go to the real resolver. ``asked`` counts the lookups of each stubbed name."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers, self.asked = answers, dict.fromkeys(answers, 0)

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        replies = self.answers[name]
        address = replies[min(self.asked[name], len(replies) - 1)]
        self.asked[name] += 1
        number = int(port or 0)
        if ipaddress.ip_address(address).version == 6:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, number, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, number))]


@pytest.fixture
def production(settings: Any) -> Any:
    settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE = False
    settings.SOLBOARD_WEBHOOK_TIMEOUT_SECONDS = 1.0
    return settings


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


@pytest.fixture
def hits() -> Iterator[tuple[int, list[str]]]:
    """A receiver on 127.0.0.1 that records every request line and answers 200."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(self.requestline)
            self.send_response(200)
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server, port = serve(Handler)
    yield port, seen
    server.shutdown()
    server.server_close()


def owed_delivery(user: Any, url: str) -> WebhookDelivery:
    """A finished evaluation of a submission made with a token whose callback is ``url`` (the token is
    issued directly: these tests are about deliveries, not about the check at creation)."""
    ApiToken.objects.filter(user=user).delete()
    client = client_for(user, callback_url=url)
    submission_id = client.post("/api/submissions", submit_body(), format="json").json()["id"]
    finish(Evaluation.objects.get(submission_id=submission_id), "failed")
    return WebhookDelivery.objects.get()


@pytest.mark.parametrize("address", REFUSED)
def test_loopback_private_link_local_multicast_and_their_ipv6_forms_are_refused(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("url", ["http://127.0.0.1/hook", "http://[::1]/", "http://169.254.169.254/latest/meta-data",
                                 "http://[::ffff:169.254.169.254]/", "http://2130706433/", "http://0x7f.1/",
                                 "http://[fe80::1]/", "http://metadata.test/computeMetadata/v1/",
                                 "http://user:secret@8.8.8.8/", "gopher://8.8.8.8/", "file:///etc/passwd"])
def test_a_token_whose_callback_reaches_into_the_sites_network_is_refused_when_created(
        alice_api: APIClient, production: Any, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", Resolver({"metadata.test": ["169.254.169.254"]}))
    response = alice_api.post("/api/tokens", {"callback_url": url}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["field"] == "callback_url"


def test_a_token_whose_callback_is_public_is_created(alice_api: APIClient, production: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", Resolver({"hooks.test": ["8.8.8.8", "2606:4700:4700::1111"]}))
    response = alice_api.post("/api/tokens", {"callback_url": "https://hooks.test/x?y=1"}, format="json")
    assert response.status_code == 201 and response.json()["webhook_secret"].startswith("whsec_")


def test_dns_rebinding_gains_nothing_the_post_goes_to_the_address_that_was_checked(
        alice: Any, catalogue: None, production: Any, monkeypatch: pytest.MonkeyPatch,
        hits: tuple[int, list[str]]) -> None:
    port, seen = hits
    resolver = Resolver({"rebind.test": ["8.8.8.8", "127.0.0.1"]})  # public to the check, loopback next
    delivery = owed_delivery(alice, f"http://rebind.test:{port}/hook")
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    started = time.monotonic()
    assert attempt(delivery.pk) is not None  # not delivered: 8.8.8.8 has no such receiver
    assert seen == [] and resolver.asked["rebind.test"] == 1  # one lookup, never a second one
    assert time.monotonic() - started < 5
    assert WebhookDelivery.objects.get().state == "pending"


def test_a_name_that_turns_private_after_the_token_was_made_is_refused_at_delivery(
        alice: Any, catalogue: None, production: Any, monkeypatch: pytest.MonkeyPatch,
        hits: tuple[int, list[str]]) -> None:
    port, seen = hits
    delivery = owed_delivery(alice, f"http://later.test:{port}/hook")
    monkeypatch.setattr(socket, "getaddrinfo", Resolver({"later.test": ["127.0.0.1"]}))
    attempt(delivery.pk)
    assert seen == [] and "not a public address" in WebhookDelivery.objects.get().last_error


def test_a_redirect_is_never_followed(alice: Any, catalogue: None, settings: Any,
                                      hits: tuple[int, list[str]]) -> None:
    settings.SOLBOARD_WEBHOOK_ALLOW_PRIVATE = True  # both servers are local; the point is the redirect
    metadata_port, reached = hits

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{metadata_port}/latest/meta-data/")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server, port = serve(Redirect)
    try:
        delivery = owed_delivery(alice, f"http://127.0.0.1:{port}/hook")
        assert attempt(delivery.pk) is not None
    finally:
        server.shutdown()
        server.server_close()
    delivery.refresh_from_db()
    assert reached == [] and delivery.response_status == 302 and "not followed" in delivery.last_error


def test_a_receiver_that_drips_its_answer_is_cut_at_the_deadline() -> None:
    stop = threading.Event()

    class Drip(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # one header byte every 0.2 s: each read is quick, the answer never ends
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while not stop.is_set():
                self.wfile.write(b"a")
                self.wfile.flush()
                time.sleep(0.2)

        def log_message(self, *args: Any) -> None:
            pass

    server, port = serve(Drip)
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            post_pinned(Target("http", "127.0.0.1", port, "/hook", "127.0.0.1"), b"{}", {}, timeout=1.0)
        except (OSError, http.client.HTTPException) as error:
            errors.append(error)

    worker = threading.Thread(target=deliver, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(timeout=10)
    elapsed = time.monotonic() - started
    stop.set()
    server.shutdown()
    server.server_close()
    assert not worker.is_alive(), "the POST outlived its deadline"
    assert elapsed < 3 and len(errors) == 1, (elapsed, errors)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for hooks.test (openssl's command line)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=hooks.test", "-addext", "subjectAltName=DNS:hooks.test", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_tls_sends_the_host_name_and_checks_the_certificate_against_it(
        certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = certificate
    names: list[str | None] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.sni_callback = lambda sock, name, context: names.append(name)  # type: ignore[assignment,misc,func-returns-value]
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = int(server.server_address[1])
    monkeypatch.setattr(
        socket, "getaddrinfo", Resolver({"hooks.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    )
    trusting = ssl.create_default_context(cafile=str(cert))
    try:
        right = check_url(f"https://hooks.test:{port}/hook", allow_private=True)
        assert post_pinned(right, b"{}", {"Content-Type": "application/json"}, 5.0, trusting) == 204
        assert names == ["hooks.test"]
        wrong = check_url(f"https://other.test:{port}/hook", allow_private=True)
        with pytest.raises(ssl.SSLCertVerificationError):
            post_pinned(wrong, b"{}", {}, 5.0, trusting)
        untrusted = Target("https", "hooks.test", port, "/hook", "127.0.0.1")
        with pytest.raises(
            ssl.SSLCertVerificationError
        ):  # the system's trust store: a self-signed cert fails
            post_pinned(untrusted, b"{}", {}, 5.0)
    finally:
        server.shutdown()
        server.server_close()


def test_a_url_with_credentials_or_another_scheme_is_refused_before_any_lookup() -> None:
    for url in ("http://user:pw@hooks.test/", "ftp://hooks.test/", "http:///nohost", "http://hooks.test:99999/"):
        with pytest.raises(RefusedCallback):
            check_url(url, allow_private=True)
