"""API tokens: shown once at creation, stored as a sha256 hash with a short visible prefix."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "sol_"
PREFIX_LENGTH = 8
#: last_used_at is a hint for operators, not an audit log: write it at most this often.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(plain: str) -> str:
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @classmethod
    def issue(cls, user: Any, name: str = "") -> tuple[ApiToken, str]:
        """A new token for ``user``; the plain text is returned once and never stored."""
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, prefix=plain[:PREFIX_LENGTH], token_hash=hash_token(plain))
        return token, plain

    @classmethod
    def authenticate(cls, plain: str) -> Any | None:
        """The active user this token belongs to, or None (revoked, unknown, inactive user)."""
        if not plain or not plain.startswith(TOKEN_PREFIX):
            return None
        wanted = hash_token(plain)
        candidates = cls.objects.filter(prefix=plain[:PREFIX_LENGTH], revoked_at=None).select_related("user")
        for token in candidates:
            if hmac.compare_digest(token.token_hash, wanted) and token.user.is_active:
                token._touch()
                return token.user
        return None

    def revoke(self) -> None:
        ApiToken.objects.filter(pk=self.pk, revoked_at=None).update(revoked_at=timezone.now())
        self.refresh_from_db(fields=["revoked_at"])

    def _touch(self) -> None:
        now = timezone.now()
        if self.last_used_at is None or now - self.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now
