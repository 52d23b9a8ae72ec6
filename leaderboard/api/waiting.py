"""Waiting without spinning: ``GET /api/submissions/{id}?wait=S`` (long-poll) and
``GET /api/submissions/{id}/events`` (server-sent events), served by async views.

Under the ASGI server (uvicorn) a waiting client holds no worker thread: it awaits a future.
One poller per event loop reads the states of *every* watched submission in one query every
``SOLBOARD_WAIT_POLL_SECONDS`` and resolves the futures of those that changed, so 200 waiters
cost one small query per interval, not 200. Authentication, permissions and the body itself come
from the ordinary DRF detail view, called before and after the wait.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from rest_framework.utils.encoders import JSONEncoder

from leaderboard.api.errors import ApiError
from leaderboard.api.presenters import evaluation_state, state_token, submission_body
from leaderboard.api.views_submissions import SubmissionDetailView
from leaderboard.models import Evaluation, Submission

logger = logging.getLogger(__name__)
detail_view = SubmissionDetailView.as_view()
#: Keep-alive comment on an idle event stream (proxies drop silent connections).
SSE_KEEPALIVE_S = 15.0
#: An event stream ends after this long; the client reconnects (EventSource does so by itself).
SSE_MAX_S = 600.0


def current_states(submission_ids: list[int]) -> dict[int, str]:
    """submission id -> state token, for all of them in one query (runs in a worker thread)."""
    close_old_connections()
    pairs: dict[int, list[tuple[int, str]]] = {pk: [] for pk in submission_ids}
    rows = Evaluation.objects.filter(submission_id__in=submission_ids).values_list(
        "submission_id", "id", "status", "provisional_at", "started_at")
    try:
        for submission_id, evaluation_id, status, provisional_at, started_at in rows:
            pairs[submission_id].append((evaluation_id, evaluation_state(status, provisional_at, started_at)))
    finally:
        _close_connections()  # this executor thread may not come back: hold no connection
    return {pk: state_token(items) for pk, items in pairs.items()}


class StatusWatcher:
    """Futures of waiting requests, keyed by submission, resolved by one shared poller."""

    def __init__(self) -> None:
        self.waiters: dict[int, list[tuple[str, asyncio.Future[str]]]] = {}
        self.poller: asyncio.Task[None] | None = None

    async def wait_for_change(self, submission_id: int, known_state: str, timeout: float) -> bool:
        """True when the submission's state differs from ``known_state`` within ``timeout``."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        entry = (known_state, future)
        self.waiters.setdefault(submission_id, []).append(entry)
        if self.poller is None or self.poller.done():
            self.poller = asyncio.ensure_future(self._poll())
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            waiting = self.waiters.get(submission_id, [])
            if entry in waiting:
                waiting.remove(entry)
            if not waiting:
                self.waiters.pop(submission_id, None)

    async def _poll(self) -> None:
        interval = float(settings.SOLBOARD_WAIT_POLL_SECONDS)
        while self.waiters:
            try:
                states = await sync_to_async(current_states, thread_sensitive=False)(list(self.waiters))
            except Exception:
                # A failed read (the database restarting, out of connections) must not end the
                # poller: the waiters already here would all sleep to their timeout.
                logger.exception("reading the watched submissions' states failed; retrying")
                states = {}
            for future, state in to_wake(states, self.waiters):
                future.set_result(state)
            await asyncio.sleep(interval)


def to_wake(states: dict[int, str], waiters: dict[int, list[tuple[str, asyncio.Future[str]]]]
            ) -> list[tuple[asyncio.Future[str], str]]:
    """The futures whose submission's state differs from the one they know. A submission that
    was not read this round (its first waiter arrived while the query ran) wakes nobody."""
    woken = []
    for submission_id, entries in waiters.items():
        if submission_id not in states:
            continue
        woken += [(future, states[submission_id]) for known, future in entries
                  if states[submission_id] != known and not future.done()]
    return woken


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StatusWatcher] = weakref.WeakKeyDictionary()


def watcher() -> StatusWatcher:
    loop = asyncio.get_running_loop()
    if loop not in _watchers:
        _watchers[loop] = StatusWatcher()
    return _watchers[loop]


def parse_wait(raw: str) -> float:
    limit = float(settings.SOLBOARD_API_MAX_WAIT_SECONDS)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= limit:  # NaN fails this too
        raise ApiError(
            "invalid_wait", f"wait must be a number of seconds from 0 to {limit:g}, not {raw!r}", "wait"
        )
    return seconds


#: Detail renders of waiting requests running at once per process: 200 waiters arriving (or timing
#: out) together must queue on the event loop, not open 200 database connections.
_DB_SLOTS = 8
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _db_slot() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if loop not in _slots:
        _slots[loop] = asyncio.Semaphore(_DB_SLOTS)
    return _slots[loop]


def _close_connections() -> None:
    """Close this thread's database connections, unless one is inside a transaction (a test's,
    or a WSGI request with ATOMIC_REQUESTS): that one is not ours to end."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def _detail(request: HttpRequest, pk: int, before_wait: bool = False) -> Any:
    """The DRF detail view. ``before_wait``: then close this request's connection, so a waiting
    request holds none (Django would close it only when the request ends, after the wait)."""
    async with _db_slot():
        response = await sync_to_async(detail_view)(request, pk=pk)
        if before_wait:
            await sync_to_async(_close_connections)()
    return response



async def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The detail view; with ``?wait=S`` it first waits (async) for a change of status."""
    if request.method != "GET" or "wait" not in request.GET:
        return await _detail(request, pk)
    try:
        wait = parse_wait(request.GET["wait"])
    except ApiError as error:
        return error.json_response()
    response = await _detail(request, pk, before_wait=True)
    if response.status_code != 200 or response.data["status"] == "finished" or wait == 0:
        return response
    since = request.GET.get("since")
    if since and since != response.data["state"]:
        response["X-Wait-Outcome"] = "changed"  # it changed while the client was away: answer at once
        return response
    changed = await watcher().wait_for_change(pk, since or response.data["state"], wait)
    if not changed:
        response["X-Wait-Outcome"] = "timeout"
        return response
    fresh = await _detail(request, pk)
    fresh["X-Wait-Outcome"] = "changed"
    return fresh


# drf-spectacular documents the URL through the DRF view this function wraps.
submission_detail.cls = SubmissionDetailView  # type: ignore[attr-defined]
submission_detail.initkwargs = {}  # type: ignore[attr-defined]


def _event(name: str, data: dict[str, Any], event_id: str | None = None) -> str:
    lines = [f"event: {name}"] + ([f"id: {event_id}"] if event_id else [])
    return "\n".join(lines) + f"\ndata: {json.dumps(data, cls=JSONEncoder)}\n\n"


def _snapshot(pk: int, viewer: Any) -> dict[str, Any]:
    close_old_connections()
    try:
        submission = Submission.objects.select_related("problem", "user", "origin").get(pk=pk)
        return submission_body(submission, viewer, with_report=False)
    finally:
        _close_connections()


async def _stream(pk: int, viewer: Any, first: dict[str, Any]) -> AsyncIterator[str]:
    body, deadline = first, time.monotonic() + SSE_MAX_S
    yield "retry: 3000\n\n" + _event("status", body, body["state"])
    while body["status"] != "finished" and time.monotonic() < deadline:
        changed = await watcher().wait_for_change(pk, body["state"], SSE_KEEPALIVE_S)
        if not changed:
            yield ": keep-alive\n\n"
            continue
        async with _db_slot():
            body = await sync_to_async(_snapshot, thread_sensitive=False)(pk, viewer)
        yield _event("status", body, body["state"])
    yield _event("end", {"status": body["status"], "state": body["state"]}, body["state"])


async def submission_events(request: HttpRequest, pk: int) -> HttpResponse:
    """``text/event-stream``: a ``status`` event now and on every change, ``end`` when finished."""
    if request.method != "GET":
        return ApiError("method_not_allowed", f"method {request.method} not allowed").json_response()
    response = await _detail(request, pk, before_wait=True)  # authentication, permission, 404
    if response.status_code != 200:
        return response
    viewer = response.renderer_context["request"].user
    first = await sync_to_async(_snapshot, thread_sensitive=False)(pk, viewer)
    stream = StreamingHttpResponse(_stream(pk, viewer, first), content_type="text/event-stream")
    stream["Cache-Control"] = "no-cache"
    stream["X-Accel-Buffering"] = "no"  # nginx: pass events through as they come
    return stream
