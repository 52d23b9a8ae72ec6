"""Runner credentials and signed runner -> site messages. No Django here: both sides import it.

Every message a runner sends to the ``site`` queue carries an ``auth`` block next to its fields:

    {"credential": "<public id>", "ts": <unix seconds>, "nonce": "<32 hex>", "mac": "<64 hex>"}

``mac`` is HMAC-SHA256, keyed with the runner's credential key, over the canonical JSON (sorted
keys, no spaces, ASCII) of ``{"task", "body", "credential", "ts", "nonce"}``: the task name is
inside, so a signed heartbeat cannot be replayed as a result; the nonce and timestamp let the site
refuse a replay. The site derives the same key from the public id (leaderboard/dispatch/
credentials.py); the runner holds it in its credential string:

    solboard-runner:<node name>:<public id>:<key, base64url>

A credential speaks for one node name only; the site checks the message's runner names against it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CREDENTIAL_PREFIX = "solboard-runner"
AUTH_FIELD = "auth"
KEY_BYTES = 32
#: Where a runner looks for its credential (the string itself, or a 0600 file holding it).
CREDENTIAL_VARIABLE = "SOLBOARD_RUNNER_CREDENTIAL"
CREDENTIAL_FILE_VARIABLE = "SOLBOARD_RUNNER_CREDENTIAL_FILE"


class CredentialError(ValueError):
    """A credential (or the file holding it) cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class Credential:
    node: str
    public_id: str
    key: bytes

    def __str__(self) -> str:  # never the key: a credential must not end up in a log by accident
        return f"runner credential {self.public_id} for {self.node}"

    def secret_string(self) -> str:
        key = base64.urlsafe_b64encode(self.key).decode().rstrip("=")
        return f"{CREDENTIAL_PREFIX}:{self.node}:{self.public_id}:{key}"

    @property
    def fingerprint(self) -> str:
        """Shown by the site and the runner so an operator can match a file to its row."""
        return hashlib.sha256(self.key).hexdigest()[:12]


def default_name() -> str:
    """The node name a credential is issued for when none is given: this host's short name."""
    host = socket.gethostname().split(".")[0]
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in host) or "runner"


def parse_credential(text: str) -> Credential:
    parts = text.strip().split(":")
    if len(parts) != 4 or parts[0] != CREDENTIAL_PREFIX or not all(parts):
        raise CredentialError(f"a runner credential looks like {CREDENTIAL_PREFIX}:NODE:ID:KEY "
                              "(as printed by `manage.py runner_credentials issue NODE`)")
    _, node, public_id, encoded = parts
    try:
        key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise CredentialError("the runner credential's key is not base64url") from None
    if len(key) != KEY_BYTES:
        raise CredentialError(f"the runner credential's key has {len(key)} bytes, not {KEY_BYTES}")
    return Credential(node=node, public_id=public_id, key=key)


def read_private_file(path: Path, what: str) -> str:
    """The stripped text of a file only its owner may read; a group/world-readable one is refused
    (anyone else on the host could copy the secret in it)."""
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialError(f"{what} file {path} is readable by others (mode {stat.S_IMODE(mode):o}): "
                                  f"run `chmod 600 {path}`")
        return path.read_text().strip()
    except OSError as error:
        raise CredentialError(f"{what} file {path} cannot be read: {error.strerror or error}") from None


def write_private_file(path: Path, text: str) -> None:
    """Create (or replace) ``path`` with mode 0600 from the first byte: never readable by others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text + "\n")
    os.replace(temporary, path)


def credential_from_environment(default_file: Path | None = None) -> Credential | None:
    """SOLBOARD_RUNNER_CREDENTIAL, else the file SOLBOARD_RUNNER_CREDENTIAL_FILE names, else
    ``default_file`` when it exists (``make run`` writes one under var/); None when none is set."""
    text = os.environ.get(CREDENTIAL_VARIABLE, "").strip()
    if text:
        return parse_credential(text)
    named = os.environ.get(CREDENTIAL_FILE_VARIABLE, "").strip()
    if named:
        return parse_credential(read_private_file(Path(named), CREDENTIAL_FILE_VARIABLE))
    if default_file is not None and default_file.exists():
        return parse_credential(read_private_file(default_file, "runner credential"))
    return None


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode()


def message_mac(key: bytes, task: str, body: dict[str, Any], public_id: str, ts: int, nonce: str) -> str:
    signed = {"task": task, "body": body, "credential": public_id, "ts": ts, "nonce": nonce}
    return hmac.new(key, canonical_json(signed), hashlib.sha256).hexdigest()


def sign(task: str, body: dict[str, Any], credential: Credential, now: float | None = None) -> dict[str, Any]:
    """``body`` with an ``auth`` block for ``task``; a fresh nonce each call (a re-send is new)."""
    ts, nonce = int(time.time() if now is None else now), secrets.token_hex(16)
    mac = message_mac(credential.key, task, body, credential.public_id, ts, nonce)
    return {**body, AUTH_FIELD: {"credential": credential.public_id, "ts": ts, "nonce": nonce, "mac": mac}}


def unsigned(payload: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The message's own fields, and its ``auth`` block (None when it has none)."""
    body = {key: value for key, value in payload.items() if key != AUTH_FIELD}
    return body, payload.get(AUTH_FIELD)
