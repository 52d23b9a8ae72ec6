"""API tokens: shown once at creation, stored as a sha256 hash with a short visible prefix.

A token may carry agent metadata (agent name, model, version), copied onto every submission made
with it so results say which program produced them, and a callback URL: each evaluation of those
submissions that reaches a terminal status is POSTed there, signed with the token's webhook
secret (HMAC-SHA256, ``leaderboard.api.webhooks``). The API and the website share the functions
below (``issue_token``, ``tokens_of``, ``revoke_token``) so both enforce the same rules.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "sol_"
PREFIX_LENGTH = 8
WEBHOOK_SECRET_PREFIX = "whsec_"
#: last_used_at is a hint for operators, not an audit log: write it at most this often.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(plain: str) -> str:
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AgentInfo:
    """Who is submitting, as the program says: shown on its results, never trusted for anything."""

    name: str = ""
    model: str = ""
    version: str = ""


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    agent_name = models.CharField(max_length=100, blank=True, help_text="e.g. the agent's program name.")
    agent_model = models.CharField(max_length=100, blank=True, help_text="e.g. the LLM behind the agent.")
    agent_version = models.CharField(max_length=64, blank=True)
    callback_url = models.URLField(max_length=500, blank=True, help_text="Webhook for terminal statuses.")
    # Kept in clear text: the site needs it to sign each webhook. Shown to the owner once.
    webhook_secret = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def agent(self) -> AgentInfo:
        return AgentInfo(self.agent_name, self.agent_model, self.agent_version)

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def issue(
        cls, user: Any, name: str = "", agent: AgentInfo | None = None, callback_url: str = ""
    ) -> tuple[ApiToken, str]:
        """A new token for ``user``; the plain text is returned once and never stored."""
        agent = agent or AgentInfo()
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        secret = WEBHOOK_SECRET_PREFIX + secrets.token_hex(24) if callback_url else ""
        token = cls.objects.create(
            user=user, name=name, prefix=plain[:PREFIX_LENGTH], token_hash=hash_token(plain),
            agent_name=agent.name, agent_model=agent.model, agent_version=agent.version,
            callback_url=callback_url, webhook_secret=secret,
        )
        return token, plain

    @classmethod
    def resolve(cls, plain: str) -> ApiToken | None:
        """The active token with this plain text, its user active too; None otherwise."""
        if not plain or not plain.startswith(TOKEN_PREFIX):
            return None
        wanted = hash_token(plain)
        candidates = cls.objects.filter(prefix=plain[:PREFIX_LENGTH], revoked_at=None).select_related("user")
        for token in candidates:
            if hmac.compare_digest(token.token_hash, wanted) and token.user.is_active:
                token._touch()
                return token
        return None

    @classmethod
    def authenticate(cls, plain: str) -> Any | None:
        """The active user this token belongs to, or None (revoked, unknown, inactive user)."""
        token = cls.resolve(plain)
        return token.user if token is not None else None

    def revoke(self) -> None:
        ApiToken.objects.filter(pk=self.pk, revoked_at=None).update(revoked_at=timezone.now())
        self.refresh_from_db(fields=["revoked_at"])

    def _touch(self) -> None:
        now = timezone.now()
        if self.last_used_at is None or now - self.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now


def issue_token(
    user: Any, name: str = "", agent: AgentInfo | None = None, callback_url: str = ""
) -> tuple[ApiToken, str]:
    """Create a token for its owner (API and web page). Returns the row and the plain token,
    which is shown once; ``token.webhook_secret`` is set when a callback URL is given."""
    return ApiToken.issue(user, name=name, agent=agent, callback_url=callback_url)


def tokens_of(user: Any, include_revoked: bool = False) -> models.QuerySet[ApiToken]:
    tokens = ApiToken.objects.filter(user=user)
    return tokens if include_revoked else tokens.filter(revoked_at=None)


def revoke_token(user: Any, token_id: int) -> bool:
    """Revoke one of ``user``'s own tokens; False when it is not theirs, unknown or already revoked."""
    token = ApiToken.objects.filter(pk=token_id, user=user, revoked_at=None).first()
    if token is None:
        return False
    token.revoke()
    return True
