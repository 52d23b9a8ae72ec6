"""Callback URLs: which ones the site may POST to, and a POST that goes exactly where it was checked.

A webhook is a request the site makes on a stranger's behalf, so the URL is a way into the site's
own network unless three things hold:

- **Every address the host resolves to is public** (``refusal``): not loopback, private, link-local
  (169.254.169.254 is a cloud's metadata service), multicast, reserved or unspecified, including
  the IPv6 forms that carry an IPv4 address (``::ffff:127.0.0.1``, NAT64 ``64:ff9b::/96``, 6to4,
  Teredo). Checked when a token is created and again at every delivery.
- **The connection goes to the address that was checked** (``post_pinned``): the name is resolved
  once and the socket connects to that IP, so a name server that answers a public address to the
  check and 127.0.0.1 to the connection (DNS rebinding) gains nothing. TLS still verifies the
  certificate against the host name, sent as SNI.
- **No redirect is followed**: a 3xx is a failed attempt, never a second request to wherever
  ``Location`` points.

Time and size are bounded: one deadline covers connect, TLS, the request and the answer's status
line and headers (a receiver that drips bytes is cut at the deadline), and the answer's body is
never read.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: NAT64's well-known prefix: its addresses carry an IPv4 address in their last 32 bits.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
SCHEMES = {"http": 80, "https": 443}


class RefusedCallback(ValueError):
    """The URL is not one the site may call; the message says why."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``address``) and what to ask for there."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    return ip.teredo[1] if ip.teredo is not None else None


def refusal(ip: IPAddress) -> str | None:
    """Why the site must not connect to ``ip`` (None for a public unicast address). Multicast is
    tested first: Python counts some IPv6 multicast scopes (ff02::1) as global."""
    embedded = _embedded_ipv4(ip)
    if embedded is not None:  # the IPv4 address is where the packets go: it alone decides
        inner = refusal(embedded)
        return None if inner is None else f"{ip} carries the IPv4 address {embedded}, which is {inner}"
    checks = (
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("not globally routable", not ip.is_global),
    )
    return next((f"a {what} address" if what != "not globally routable" else what
                 for what, applies in checks if applies), None)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an IP literal resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise RefusedCallback(f"{host!r} does not resolve: {error}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise RefusedCallback(f"{host!r} does not resolve")
    return list(dict.fromkeys(addresses))


@dataclass(frozen=True)
class Parsed:
    scheme: str
    host: str
    port: int
    path: str


def parse_url(url: str) -> Parsed:
    """What a callback URL names, before any lookup; RefusedCallback for a URL the site never calls."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise RefusedCallback("the callback URL must be http:// or https://")
    if parts.username is not None or parts.password is not None:
        raise RefusedCallback("the callback URL must not carry credentials (deliveries are signed instead)")
    host = parts.hostname or ""
    if not host:
        raise RefusedCallback("the callback URL names no host")
    try:
        port = parts.port or SCHEMES[scheme]
    except ValueError:
        raise RefusedCallback("the callback URL's port is not a number from 1 to 65535") from None
    return Parsed(scheme, host, port, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))


def check_url(url: str, allow_private: bool) -> Target:
    """The target of a callback URL, resolved now; RefusedCallback when the site may not call it.
    With ``allow_private`` (development only) any address is accepted."""
    parsed = parse_url(url)
    addresses = resolve(parsed.host, parsed.port)
    if not allow_private:
        for ip in addresses:
            why = refusal(ip)
            if why is not None:
                raise RefusedCallback(f"{parsed.host!r} resolves to {ip}, {why}: not a public address")
    return Target(parsed.scheme, parsed.host, parsed.port, parsed.path, str(addresses[0]))


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked address; the Host header still names the URL's host."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.pinned = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.pinned, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to the checked address, with SNI and the certificate checked against the URL's host."""

    def __init__(self, target: Target, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self.pinned, self.tls = target.address, context

    def connect(self) -> None:
        raw = socket.create_connection((self.pinned, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


def post_pinned(target: Target, body: bytes, headers: dict[str, str], timeout: float,
                context: ssl.SSLContext | None = None) -> int:
    """POST ``body`` to ``target.address``; the answer's status code. Raises OSError (network,
    TLS, the deadline) or http.client.HTTPException (a malformed answer)."""
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = _PinnedHTTPSConnection(target, timeout, context or ssl.create_default_context())
    else:
        connection = _PinnedHTTPConnection(target, timeout)
    cut = threading.Event()
    deadline = threading.Timer(timeout, _cut, args=(connection, cut))
    deadline.start()
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        status = int(connection.getresponse().status)  # the body is never read
    finally:
        deadline.cancel()
        connection.close()
    if cut.is_set():  # an answer cut short can still parse: it is not one
        raise TimeoutError(f"no complete answer within {timeout:g} s")
    return status


def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The deadline: a blocked read or write on the socket returns at once."""
    cut.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
