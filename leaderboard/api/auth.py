"""``Authorization: Bearer sol_...`` for programs; the site's session for browsers.

A request authenticated by token has ``request.auth`` set to its ``ApiToken`` (agent metadata,
callback URL); a session request has ``request.auth`` None. A header that names the Bearer scheme
with a bad token is refused (401 ``invalid_token``) rather than treated as anonymous, so a
revoked token in a CI job fails loudly instead of silently reading public data.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from leaderboard.models import ApiToken
from leaderboard.throttling import login_locked_error

SCHEME = "bearer"


def bearer_token(header: str) -> str | None:
    """The token of an ``Authorization`` header that uses the Bearer scheme, else None."""
    parts = header.split()
    if not parts or parts[0].lower() != SCHEME:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("the Authorization header must be 'Bearer <token>'")
    return parts[1]


def token_for_header(header: str) -> ApiToken | None:
    """The token named by an Authorization header; None without one; raises on a bad one."""
    plain = bearer_token(header)
    if plain is None:
        return None
    token = ApiToken.resolve(plain)
    if token is None:
        raise exceptions.AuthenticationFailed("the API token is unknown, revoked, or its user is inactive")
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        token = token_for_header(request.META.get("HTTP_AUTHORIZATION", ""))
        return None if token is None else (token.user, token)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How drf-spectacular documents the token (``bearerAuth`` in the schema)."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "sol_..."}


class PasswordAuthentication(authentication.BasicAuthentication):
    """HTTP Basic, where a password is traded for a token once (``POST /api/tokens``): failures are
    counted by django-axes like the login form's, and a locked-out address or username gets a 429
    ``login_locked`` with ``Retry-After`` (before the password is checked, and on the failure that
    reaches the limit)."""

    def authenticate_credentials(self, userid: str, password: str, request: Any = None) -> tuple[Any, None]:
        credentials = {"username": userid}
        if request is not None and AxesProxyHandler.is_locked(request, credentials):
            raise login_locked_error()
        try:
            return super().authenticate_credentials(userid, password, request)  # type: ignore[no-any-return]
        except exceptions.AuthenticationFailed:
            if request is not None and AxesProxyHandler.is_locked(request, credentials):
                raise login_locked_error() from None
            raise


class PasswordAuthenticationScheme(OpenApiAuthenticationExtension):
    """How drf-spectacular documents HTTP Basic on ``POST /api/tokens`` (``basicAuth``)."""

    target_class = PasswordAuthentication
    name = "basicAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "basic"}


#: The site's session comes second (CSRF enforced on writes, as DRF does).
API_AUTHENTICATION = (BearerTokenAuthentication, authentication.SessionAuthentication)
