"""The caller's own things: API tokens (created, listed, revoked by their owner), quota, and the
server's limits (``GET /api/``) that a client reads to wait as long as the server allows."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard import gpu_time
from leaderboard.api import quotas
from leaderboard.api import serializers as s
from leaderboard.api.auth import API_AUTHENTICATION, PasswordAuthentication
from leaderboard.api.errors import ApiError
from leaderboard.api.views_submissions import ERRORS, ApiView
from leaderboard.models import ApiToken
from leaderboard.models.tokens import AgentInfo, issue_token, revoke_token, tokens_of
from leaderboard.throttling import RateLimit

API_VERSION = "1"
TOKEN_CREATION = RateLimit("token-creation", "SOLBOARD_TOKENS_PER_HOUR", 3600)


def token_body(token: ApiToken, gpu_seconds: dict[str, float] | None = None) -> dict[str, Any]:
    usage = gpu_seconds or {"total": 0.0, "today": 0.0}
    return {"id": token.pk, "name": token.name, "prefix": token.prefix, "agent_name": token.agent_name,
            "agent_model": token.agent_model, "agent_version": token.agent_version,
            "callback_url": token.callback_url, "created_at": token.created_at,
            "last_used_at": token.last_used_at, "revoked_at": token.revoked_at,
            "gpu_seconds_total": usage["total"], "gpu_seconds_today": usage["today"]}


class TokenListCreateView(ApiView):
    # Basic auth here only: `solboard login` trades a username and password for a token once.
    authentication_classes = (*API_AUTHENTICATION, PasswordAuthentication)

    @extend_schema(responses={200: s.TokenSerializer(many=True), **ERRORS}, summary="Your active API tokens")
    def get(self, request: Request) -> Response:
        revoked = request.query_params.get("include_revoked") in ("1", "true")
        tokens = list(tokens_of(request.user, include_revoked=revoked))
        usage = gpu_time.token_totals([token.pk for token in tokens], quotas.day_bounds()[0])
        return Response([token_body(token, usage[token.pk]) for token in tokens])

    @extend_schema(request=s.TokenCreateSerializer, responses={201: s.NewTokenSerializer, **ERRORS},
                   summary="Create a token (shown once), with optional agent metadata and webhook URL")
    def post(self, request: Request) -> Response:
        serializer = s.TokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        TOKEN_CREATION.charge(request.user.pk)
        agent = AgentInfo(data["agent_name"], data["agent_model"], data["agent_version"])
        token, plain = issue_token(
            request.user, name=data["name"], agent=agent, callback_url=data["callback_url"]
        )
        return Response(
            {**token_body(token), "token": plain, "webhook_secret": token.webhook_secret}, status=201
        )


class TokenRevokeView(ApiView):
    @extend_schema(request=None, responses={204: OpenApiResponse(description="revoked"), **ERRORS},
                   summary="Revoke one of your tokens")
    def delete(self, request: Request, pk: int) -> Response:
        if not revoke_token(request.user, pk):
            raise ApiError("not_found", f"no active token {pk} of yours")
        return Response(status=204)


class QuotaView(ApiView):
    @extend_schema(responses={200: dict, **ERRORS}, summary="Your quotas: used, left, reset time")
    def get(self, request: Request) -> Response:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Response(quotas.summary(request.user, token))


def max_wait_seconds() -> int:
    return int(settings.SOLBOARD_API_MAX_WAIT_SECONDS)


class MetaView(ApiView):
    permission_classes = (AllowAny,)

    @extend_schema(responses={200: s.MetaSerializer}, summary="API version, limits, and who you are")
    def get(self, request: Request) -> Response:
        user = request.user.get_username() if request.user.is_authenticated else None
        return Response(
            {
                "api_version": API_VERSION,
                "max_batch": s.MAX_BATCH,
                "max_wait_seconds": max_wait_seconds(),
                "max_source_bytes": s.max_source_bytes(),
                "max_body_bytes": int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
                "user": user,
            }
        )
