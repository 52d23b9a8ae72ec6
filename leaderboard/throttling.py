"""Who is asking, and how often: the client's address behind a proxy, the answer to a locked-out
login, and the per-user request rates of the API.

Password guessing is counted by django-axes (its database handler, so every web process sees the
same counts): the web login form, the admin's and HTTP Basic on ``POST /api/tokens`` all go through
``django.contrib.auth.authenticate``. After ``SOLBOARD_LOGIN_FAILURE_LIMIT`` failures from one
address, or against one username, logins are refused for ``SOLBOARD_LOGIN_COOLOFF_MINUTES``, the
right password included: a 429 with ``Retry-After`` (JSON for the API, a page for the website).
API tokens keep working during a lockout: they are not passwords.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaderboard.api.errors import ApiError


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: ``REMOTE_ADDR``, or, behind ``SOLBOARD_TRUSTED_PROXIES`` proxies, the
    address the outermost trusted proxy saw (counted from the right of ``X-Forwarded-For``, so a
    client cannot choose it by sending the header itself)."""
    proxies = int(settings.SOLBOARD_TRUSTED_PROXIES)
    remote = request.META.get("REMOTE_ADDR")
    if proxies <= 0:
        return remote
    forwarded = [
        part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()
    ]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def cooloff_seconds() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds())


def login_locked_error() -> ApiError:
    wait = cooloff_seconds()
    return ApiError(
        "login_locked",
        f"too many failed logins from this address or for this user; try again in "
        f"{wait // 60} minutes (API tokens still work)",
        headers={"Retry-After": str(wait)},
        retry_after=wait,
    )


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """axes' answer to a locked-out login (``AXES_LOCKOUT_CALLABLE``): 429 with ``Retry-After``."""
    if request.path.startswith("/api/"):
        return login_locked_error().json_response()
    wait = cooloff_seconds()
    response = render(request, "web/locked_out.html", {"minutes": max(1, wait // 60)}, status=429)
    response["Retry-After"] = str(wait)
    return response


class RateLimit:
    """At most the setting ``limit_setting`` requests of one kind per user in a fixed window of
    ``window`` seconds, counted in the cache (``SOLBOARD_CACHE_URL``: shared by every web process in
    production; without it each process counts its own)."""

    def __init__(self, scope: str, limit_setting: str, window: int) -> None:
        self.scope, self.limit_setting, self.window = scope, limit_setting, window

    @property
    def limit(self) -> int:
        return int(getattr(settings, self.limit_setting))

    def _key(self, user_id: int) -> tuple[str, int]:
        """The cache key of the current window, and the seconds until the next one."""
        now = int(time.time())
        window_start = now - now % self.window
        return f"solboard:rate:{self.scope}:{user_id}:{window_start}", window_start + self.window - now

    def add(self, user_id: int, cost: int = 1) -> int:
        """Count ``cost`` now; the window's total."""
        key, _ = self._key(user_id)
        cache.add(key, 0, timeout=self.window + 5)
        try:
            return int(cache.incr(key, cost))
        except ValueError:  # evicted between add and incr: start the window again
            cache.set(key, cost, timeout=self.window + 5)
            return cost

    def refusal(self, used: int) -> ApiError:
        _, wait = self._key(0)
        return ApiError(
            "rate_limited",
            f"at most {self.limit} {self.scope} per {self.window} s (used {used}); retry in {wait} s",
            headers={"Retry-After": str(max(1, wait))},
            retry_after=wait,
            limit=self.limit,
        )

    def charge(self, user_id: int, cost: int = 1) -> None:
        """Count ``cost`` requests now; ApiError ``rate_limited`` (429, ``Retry-After``) past the limit."""
        used = self.add(user_id, cost)
        if used > self.limit:
            raise self.refusal(used)

    def ensure_left(self, user_id: int) -> None:
        """Refuse (as ``charge`` would) when the window is already spent, counting nothing: for a
        cost known only afterwards (compile seconds), charged then with ``add``."""
        key, _ = self._key(user_id)
        used = int(cache.get(key, 0))
        if used >= self.limit:
            raise self.refusal(used)
