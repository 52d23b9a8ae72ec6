"""The one error shape of the API: ``{"error": {"code", "message", "field", ...}}``.

Codes are stable (programs branch on them; docs/api.md lists them); messages are for people and
may change. ``ApiError`` carries a code; DRF's own exceptions and Django's ``ValidationError`` are
translated by ``exception_handler``; ``ErrorEnvelopeMiddleware`` covers what never reaches a DRF
view (an unknown ``/api/`` URL, a body over the size limit, an unexpected exception).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

from evaluator.vocabulary import NATIVE_LANGUAGES
from leaderboard.middleware import HybridMiddleware
from solboard_common.limits import source_limit, source_too_large

log = logging.getLogger(__name__)

#: code -> (HTTP status, when it is used). The table docs/api.md reproduces.
ERROR_CODES: dict[str, tuple[int, str]] = {
    "invalid": (400, "a field is missing or malformed; `field` names it"),
    "malformed_json": (400, "the body is not valid JSON"),
    "json_too_deep": (400, "the JSON body nests objects and arrays deeper than the limit (`limit`, 32)"),
    "json_too_many_values": (400, "the JSON body holds more values than the limit (`limit`, 10,000)"),
    "unknown_problem": (400, "no active problem by that name"),
    "unsupported_language": (400, "the problem does not accept this language (or the language is unknown)"),
    "unknown_gpu_type": (400, "a GPU type is unknown, or cannot run this language"),
    "invalid_mode": (400, "mode is neither test nor ranked"),
    "invalid_source": (400, "the source is empty or contains a NUL byte"),
    "syntax_error": (400, "the Python source does not parse (line number in the message)"),
    "compile_error": (400, "ptxas/nvcc refused the PTX/CUDA source (their messages, with line numbers)"),
    "invalid_launch_spec": (400, "the launch spec is malformed or does not fit the problem"),
    "batch_too_large": (400, "a batch holds more submissions than the limit"),
    "invalid_idempotency_key": (400, "the Idempotency-Key header is empty or longer than 255 characters"),
    "invalid_wait": (400, "wait is not a number of seconds between 0 and the maximum"),
    "not_authenticated": (401, "no credentials were given"),
    "invalid_token": (401, "the bearer token is unknown, revoked, or its user is inactive"),
    "permission_denied": (403, "authenticated, but not allowed to do this"),
    "not_found": (404, "no such object, or it is not yours"),
    "method_not_allowed": (405, "the URL does not accept this method"),
    "not_acceptable": (406, "no representation matches the Accept header"),
    "idempotency_conflict": (409, "the Idempotency-Key was used before with a different request"),
    "not_cancellable": (409, "the evaluation already ended"),
    "still_running": (409, "a re-run needs every evaluation of the submission to have ended"),
    "payload_too_large": (413, "the request body is over the limit (stated in the message and `limit`)"),
    "source_too_large": (413, "the source is over the limit (stated in the message and `limit`)"),
    "unsupported_media_type": (415, "the body is not JSON"),
    "quota_exceeded": (429, "a quota is spent: `Retry-After` says when to retry, `quota` which one"),
    "login_locked": (429, "too many failed logins from this address or for this user: `Retry-After`"),
    "rate_limited": (
        429,
        "too many requests of this kind: `Retry-After` says when to retry, `limit` how many",
    ),
    "compile_busy": (
        429,
        "your uploads are already compiling (or a batch used its compile time): `Retry-After`",
    ),
    "site_busy": (503, "the site is compiling as many uploads as it allows at once: `Retry-After`"),
    "server_error": (500, "a bug: nothing was saved; please report it"),
    "service_unavailable": (503, "the database is unreachable; retry later"),
}


class ApiError(Exception):
    """An error the API answers with its envelope; ``extra`` adds keys next to code and message."""

    def __init__(self, code: str, message: str, field: str | None = None, *,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        if code not in ERROR_CODES:
            raise ValueError(f"undocumented error code {code!r}")
        self.code, self.message, self.field = code, message, field
        self.headers = headers or {}
        self.extra = extra

    @property
    def status(self) -> int:
        return ERROR_CODES[self.code][0]

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field, **self.extra}}

    def response(self) -> Response:
        return Response(self.body(), status=self.status, headers=self.headers)

    def json_response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


#: Fields of ``create_submission``'s ValidationError -> code.
FIELD_CODES = {
    "problem": "unknown_problem",
    "language": "unsupported_language",
    "gpu_types": "unknown_gpu_type",
    "mode": "invalid_mode",
    "launch_spec": "invalid_launch_spec",
}


def from_validation_error(error: DjangoValidationError, language: str = "") -> ApiError:
    """The first field of a ``create_submission`` ValidationError as a coded ApiError."""
    fields = error.message_dict if hasattr(error, "error_dict") else {"__all__": error.messages}
    field, messages = next(iter(fields.items()))
    message = "; ".join(str(text) for text in messages)
    if field == "source":
        code = "syntax_error" if message.startswith("Python does not parse") else (
            "compile_error" if language in NATIVE_LANGUAGES else "invalid_source")
    else:
        code = FIELD_CODES.get(field, "invalid")
    others = {name: [str(text) for text in texts] for name, texts in fields.items() if name != field}
    extra: dict[str, Any] = {"other_fields": others} if others else {}
    return ApiError(code, message, None if field == "__all__" else field, **extra)


def too_large(kind: str, size: int, limit: int) -> ApiError:
    if kind == "source":
        return ApiError("source_too_large", source_too_large(size, limit), "source", limit=limit, size=size)
    return ApiError(
        "payload_too_large",
        f"the request body is {size} bytes; the limit is {limit} bytes "
        f"(a source: {source_limit(settings.SOLBOARD_MAX_SOURCE_BYTES)})",
        None,
        limit=limit,
        size=size,
    )


def _drf_detail_text(detail: Any) -> tuple[str | None, str]:
    """(first field, its first message) of a DRF error detail (dict, list or string)."""
    if isinstance(detail, dict) and detail:
        field, value = next(iter(detail.items()))
        inner_field, text = _drf_detail_text(value)
        name = None if field in ("non_field_errors", "detail") else str(field)
        if inner_field and name:
            name = f"{name}.{inner_field}"
        return name or inner_field, text
    if isinstance(detail, list) and detail:
        return _drf_detail_text(detail[0])
    return None, str(detail)


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (drf.ParseError, "malformed_json"),
    (drf.AuthenticationFailed, "invalid_token"),
    (drf.NotAuthenticated, "not_authenticated"),
    (drf.PermissionDenied, "permission_denied"),
    (drf.NotFound, "not_found"),
    (drf.MethodNotAllowed, "method_not_allowed"),
    (drf.NotAcceptable, "not_acceptable"),
    (drf.UnsupportedMediaType, "unsupported_media_type"),
    (drf.ValidationError, "invalid"),
]


def _from_drf(exc: drf.APIException) -> ApiError:
    field, message = _drf_detail_text(exc.detail)
    code = next((code for kind, code in _DRF_CODES if isinstance(exc, kind)), None)
    if code == "invalid" and field in FIELD_CODES and "invalid_choice" in str(exc.get_codes()):
        code = FIELD_CODES[field]  # e.g. a mode not among its choices: the code create_submission gives
    elif code == "invalid" and field == "source":  # e.g. a NUL byte, refused by the field itself
        code = "invalid_source"
    if code is None:  # throttling or another status DRF knows: keep its status family
        code = "quota_exceeded" if exc.status_code == 429 else "invalid"
    headers = (
        {"WWW-Authenticate": 'Bearer realm="api"'} if code in ("not_authenticated", "invalid_token") else {}
    )
    return ApiError(code, message, field, headers=headers)


def as_api_error(exc: Exception) -> ApiError | None:
    """The envelope for any exception the API may meet; None for a bug (a 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return ApiError(
            "payload_too_large",
            f"the request body is over the limit of {limit} bytes (a source: "
            f"{source_limit(settings.SOLBOARD_MAX_SOURCE_BYTES)})",
            limit=limit,
        )
    if isinstance(exc, drf.APIException):
        return _from_drf(exc)
    if isinstance(exc, Http404):
        return ApiError("not_found", "not found")
    if isinstance(exc, PermissionDenied):
        return ApiError("permission_denied", str(exc) or "permission denied")
    busy = _compile_refusal(exc)
    if busy is not None:
        return busy
    if isinstance(exc, DjangoValidationError):
        return from_validation_error(exc)
    if isinstance(exc, DatabaseError):
        log.exception("database error answered with 503")
        return ApiError("service_unavailable", "the database did not answer; retry later")
    return None


def _compile_refusal(exc: Exception) -> ApiError | None:
    """``compile_limits.CompileBusy`` (a ValidationError with a code and a time to retry)."""
    code, retry_after = getattr(exc, "code", None), getattr(exc, "retry_after", None)
    if (
        not isinstance(exc, DjangoValidationError)
        or code not in ("compile_busy", "site_busy", "rate_limited")
        or not isinstance(retry_after, int)
    ):
        return None
    return ApiError(code, str(getattr(exc, "text", exc)), "source", headers={"Retry-After": str(retry_after)},
                    retry_after=retry_after)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every error in the envelope; unexpected ones logged as 500."""
    error = as_api_error(exc)
    if error is None:
        log.exception("unexpected error in %s", context.get("view"))
        error = ApiError("server_error", "an unexpected error occurred; nothing was saved")
    if isinstance(exc, drf.Throttled) and exc.wait is not None:
        error.headers["Retry-After"] = str(int(exc.wait) + 1)
    return error.response()


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") and not request.path.startswith(("/api/docs", "/api/schema"))


def _content_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class ErrorEnvelopeMiddleware(HybridMiddleware):
    """For ``/api/`` paths: refuse a body over the limit before reading it (413, limit stated),
    and give non-DRF errors (unknown URL, unexpected exception) the envelope too."""

    def call(self, request: HttpRequest) -> HttpResponse:
        refused = self._refuse_before_reading(request)
        return refused or self._envelope_if_needed(request, self.get_response(request))

    async def acall(self, request: HttpRequest) -> HttpResponse:
        refused = self._refuse_before_reading(request)
        return refused or self._envelope_if_needed(request, await self.get_response(request))

    @staticmethod
    def _refuse_before_reading(request: HttpRequest) -> HttpResponse | None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        size = _content_length(request)
        if _is_api(request) and size > limit:
            return too_large("body", size, limit).json_response()
        return None

    def _envelope_if_needed(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if (
            _is_api(request)
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith(("application/json", "text/event-stream"))
        ):
            return self._envelope_for(response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_api(request):
            return None
        error = as_api_error(exception)
        if error is None:
            log.exception("unexpected error at %s", request.path, exc_info=exception)
            error = ApiError("server_error", "an unexpected error occurred; nothing was saved")
        return error.json_response()

    @staticmethod
    def _envelope_for(response: HttpResponse) -> HttpResponse:
        by_status = {
            404: ("not_found", "no such API endpoint"),
            405: ("method_not_allowed", "method not allowed"),
            413: ("payload_too_large", "the request body is too large"),
            400: ("invalid", "bad request"),
            403: ("permission_denied", "forbidden"),
        }
        code, message = by_status.get(response.status_code, ("server_error", "an unexpected error occurred"))
        envelope = ApiError(code, message).json_response()
        envelope.status_code = response.status_code
        return envelope
