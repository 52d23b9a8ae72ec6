"""Runner credentials on the site: issue, revoke, and the keys that check a runner's HMAC.

A credential's key is derived, never stored: ``HMAC(SECRET_KEY, "solboard.runner-credential" +
public_id)`` (Django's ``salted_hmac``). The site can therefore recompute it to check every
message, a copy of the database alone cannot forge one, and the web has no column that could
show it. Rotating SECRET_KEY: move the old key to SECRET_KEY_FALLBACKS (its credentials keep
working) and re-issue runner credentials before dropping it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from leaderboard.models import RunnerCredential
from solboard_common.protocol import control_queue
from solboard_common.signing import Credential, parse_credential, read_private_file, write_private_file

KEY_SALT = "solboard.runner-credential.v1"


class CredentialRefused(ValueError):
    """The operator asked for something that cannot be done (bad node name, unknown credential)."""


def derive_key(public_id: str, secret: str | None = None) -> bytes:
    return salted_hmac(KEY_SALT, public_id, secret=secret, algorithm="sha256").digest()


def candidate_keys(public_id: str) -> Iterator[bytes]:
    """The key under SECRET_KEY, then under each of SECRET_KEY_FALLBACKS (rotation)."""
    yield derive_key(public_id)
    for fallback in getattr(settings, "SECRET_KEY_FALLBACKS", []):
        yield derive_key(public_id, fallback)


def check_node_name(node: str) -> str:
    try:
        control_queue(node)
    except ValueError:
        raise CredentialRefused(
            f"{node!r} is not a runner node name (letters, digits, '-', '_', '.')"
        ) from None
    return node


def new_credential(node: str) -> Credential:
    """A fresh public id for ``node`` and the key the site derives for it (not saved yet)."""
    public_id = f"rc{secrets.token_hex(8)}"
    return Credential(node=check_node_name(node), public_id=public_id, key=derive_key(public_id))


def issue(node: str, created_by: str = "") -> tuple[RunnerCredential, Credential]:
    """A new credential for ``node``: the row, and the secret to hand to the runner (shown once)."""
    credential = new_credential(node)
    row = RunnerCredential.objects.create(public_id=credential.public_id, node_name=node,
                                          created_by=created_by[:150], key_fingerprint=credential.fingerprint)
    return row, credential


def revoke(name_or_id: str) -> list[RunnerCredential]:
    """Revoke one credential (by public id) or every active one of a node (by node name)."""
    active = RunnerCredential.objects.filter(revoked_at__isnull=True)
    rows = list(active.filter(public_id=name_or_id)) or list(active.filter(node_name=name_or_id))
    if not rows:
        raise CredentialRefused(f"no active runner credential has the id or node name {name_or_id!r}")
    RunnerCredential.objects.filter(pk__in=[row.pk for row in rows]).update(revoked_at=timezone.now())
    return rows


def usable(credential: Credential) -> bool:
    """The credential is active on this site and its key is the one the site derives."""
    row = RunnerCredential.objects.filter(public_id=credential.public_id, revoked_at__isnull=True).first()
    return (row is not None and row.node_name == credential.node
            and any(secrets.compare_digest(key, credential.key) for key in candidate_keys(row.public_id)))


def ensure_dev_credential(path: Path, node: str) -> tuple[Credential, bool]:
    """``make run``'s runner credential: the one in ``path`` while it is still usable here, else a
    new one written there (0600). Returns it and whether it was issued now."""
    if path.exists():
        try:
            existing = parse_credential(read_private_file(path, "runner credential"))
        except ValueError:
            existing = None
        if existing is not None and existing.node == node and usable(existing):
            return existing, False
    with transaction.atomic():
        _, credential = issue(node, created_by="make run")
        write_private_file(path, credential.secret_string())
    return credential, True
