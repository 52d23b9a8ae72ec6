"""A small JSON client over urllib. Errors come back as ``ApiFailure`` with the API's envelope, or
``ServiceFailure`` when the service could not answer (network, 5xx)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

USER_AGENT = "solboard-cli/1"


class ServiceFailure(Exception):
    """The server could not be reached, or answered 5xx."""


@dataclass
class ApiFailure(Exception):
    """A 4xx answer: ``code``, ``message``, ``field`` from the error envelope."""

    status: int
    code: str
    message: str
    field: str | None = None
    details: dict[str, Any] = dataclass_field(default_factory=dict)
    retry_after: int | None = None

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.code}{where}: {self.message}"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


class Client:
    def __init__(self, server: str, token: str | None, timeout: float = 30.0) -> None:
        self.server, self.token, self.timeout = server.rstrip("/"), token, timeout

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float | None = None, basic: tuple[str, str] | None = None) -> Answer:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        if basic is not None:
            sent["Authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
        elif self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.server + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as answer:
                return Answer(answer.status, dict(answer.headers), _json(answer.read()))
        except urllib.error.HTTPError as error:
            raise _failure(error.code, dict(error.headers), error.read()) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ServiceFailure(f"{self.server} did not answer: {reason}") from None

    def get(self, path: str, **options: Any) -> Any:
        return self.request("GET", path, **options).body

    def post(self, path: str, body: Any, **options: Any) -> Any:
        return self.request("POST", path, body=body, **options).body


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"text": raw.decode(errors="replace")[:2000]}


def _failure(status: int, headers: dict[str, str], raw: bytes) -> Exception:
    body = _json(raw)
    error = body.get("error") if isinstance(body, dict) else None
    if status >= 500 or not isinstance(error, dict):
        message = error.get("message") if isinstance(error, dict) else str(body)[:300]
        return ServiceFailure(f"the server answered {status}: {message}")
    retry = headers.get("Retry-After")
    return ApiFailure(status, str(error.get("code")), str(error.get("message")), error.get("field"),
                      details=error, retry_after=int(retry) if retry and retry.isdigit() else None)
