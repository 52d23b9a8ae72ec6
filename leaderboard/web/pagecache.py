"""Whole pages for anonymous visitors: the home page and the problem pages, served from the cache
without touching the database, the session or a template.

Most visitors are not signed in, and their view of a ranking page is the same for all of them. This
middleware (first in ``MIDDLEWARE``) stores the finished response, headers included, the first
time such a page is built, with the data version it was built from (``leaderboard.web.cache``):

- fresh (same data version, younger than its interval: ``SOLBOARD_WEB_CACHE_SECONDS`` for the home
  page, whose queue depths change without a result, ``SOLBOARD_WEB_PAGE_SECONDS`` for a problem
  page, which a result makes out of date at once): served as stored;
- out of date: served as stored too, while the new copy is built once (a short lock in the cache
  picks one request to ask for it) through the normal middleware chain, as an anonymous GET of
  the same URL (stale-while-revalidate): no visitor waits for a rebuild. Where the cache is
  Redis (``SOLBOARD_CACHE_URL``, production) the site worker builds it (the
  ``leaderboard.rebuild_page`` task), so a web process only ever serves stored pages and never
  spends its CPU or its GIL on a rebuild; otherwise (development: a folder shared with the site
  worker, or local memory) the process builds it in a background thread, never in the thread that
  runs its sync views and Django's request signals. In development a page made out of date by a
  result (a new data version, not just age) is built for the next visitor, who sees the result;
- not cached yet: built by whoever asks.

Only GET requests without a session or messages cookie qualify, with at most the query parameters
the page reads (anything else is built normally and not stored: no junk keys, no visitor's input
echoed into someone else's page), on an allowed host, over HTTPS when the site redirects to it.
Responses that set a cookie are never stored. Under ASGI the cache is read in a worker thread,
never in the thread that runs the views.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIRequest
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import Resolver404, resolve

from leaderboard.middleware import HybridMiddleware
from leaderboard.web.cache import KEEP_SECONDS, data_version, rebuilds_on_worker, shared_cache, version_keys

#: Pages cached whole for anonymous visitors: URL name -> the query parameters the page reads.
CACHEABLE: dict[str, tuple[str, ...]] = {"home": (), "problem": ("gpu", "features", "version")}
#: Pages that change only with the events that replace their data version (results, withdrawals,
#: catalogue syncs) are rebuilt after SOLBOARD_WEB_PAGE_SECONDS at the latest (the record chart's
#: edge at "now" drifts); the others (the home page's queue depths) after SOLBOARD_WEB_CACHE_SECONDS.
VERSIONED_ONLY = frozenset({"problem"})
#: A rebuild that takes longer than this (or dies) lets another request try.
REBUILD_LOCK_SECONDS = 30
#: The site worker is remembered to have been asked for a page until the page is stored (or as
#: long as a page is kept): a page still not stored when the lock above runs out (worker down, or
#: its queue far behind) is then built by the web process itself.
ASKED_SECONDS = KEEP_SECONDS
MAX_PARAMETER_CHARS = 32
SKIPPED_HEADERS = frozenset({"content-length", "set-cookie", "date"})
#: Marks the background rebuild's own request, which must go through the whole chain.
REBUILD_MARK = "solboard.page_rebuild"


#: The site worker's task that rebuilds a page (leaderboard/web/tasks.py).
REBUILD_TASK = "leaderboard.rebuild_page"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Where a qualifying request's page lives in the cache, and what data it depends on."""

    key: str
    versions: list[str]
    environ: dict[str, Any]  # enough of the request to build the same page again
    max_age: int = 0  # seconds after which it is rebuilt even if its data version holds

    def fresh(self, entry: Any, version: str) -> bool:
        """The stored entry was built from this data version, and is younger than its interval."""
        return (isinstance(entry, dict) and entry["version"] == version
                and time.time() - entry["built_at"] < self.max_age)


@dataclass(frozen=True)
class Lookup:
    """What the cache holds for a plan: a response to serve, or the version a rebuild stores under."""

    response: HttpResponse | None
    version: str


def plan_for(request: HttpRequest) -> Plan | None:
    """The plan when this request may be answered from the cache; None when it must be built."""
    if request.method != "GET" or settings.SOLBOARD_WEB_CACHE_SECONDS <= 0 or not _anonymous(request):
        return None
    if REBUILD_MARK in request.META:
        return None
    try:
        request.get_host()  # a disallowed host gets the normal chain's 400
        match = resolve(request.path_info)
    except (DisallowedHost, Resolver404):
        return None
    if match.url_name not in CACHEABLE or (settings.SECURE_SSL_REDIRECT and not request.is_secure()):
        return None
    query = _canonical_query(request, CACHEABLE[match.url_name])
    if query is None:
        return None
    name = match.kwargs.get("name")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": request.path_info, "QUERY_STRING": query,
               "HTTP_HOST": request.get_host(), "SERVER_NAME": "rebuild", "SERVER_PORT": "0",
               "wsgi.url_scheme": request.scheme, REBUILD_MARK: "1"}
    max_age = (settings.SOLBOARD_WEB_PAGE_SECONDS if match.url_name in VERSIONED_ONLY
               else settings.SOLBOARD_WEB_CACHE_SECONDS)
    return Plan(
        f"web:page:{request.scheme}:{match.url_name}:{name or ''}?{query}",
        version_keys(name),
        environ,
        max_age,
    )


def _anonymous(request: HttpRequest) -> bool:
    """No session (signed-in visitors see their name and own rows) and no pending message."""
    cookies = request.COOKIES
    return settings.SESSION_COOKIE_NAME not in cookies and "messages" not in cookies


def _canonical_query(request: HttpRequest, allowed: tuple[str, ...]) -> str | None:
    params = request.GET
    if any(name not in allowed or len(params.getlist(name)) != 1 for name in params):
        return None
    if any(len(params[name]) > MAX_PARAMETER_CHARS for name in params):
        return None
    return "&".join(f"{name}={params[name]}" for name in sorted(params))


def lookup(plan: Plan) -> Lookup:
    """The stored page, if any; an out-of-date one is still served while a rebuild is started."""
    found = shared_cache().get_many([plan.key, *plan.versions])
    version = data_version(found, plan.versions)
    entry = found.get(plan.key)
    if not isinstance(entry, dict):
        return Lookup(None, version)
    if entry["version"] != version and not rebuilds_on_worker():
        return Lookup(None, version)  # development: the visitor after a result sees it (built in the request)
    if not plan.fresh(entry, version) and shared_cache().add(
        f"{plan.key}:rebuilding", 1, REBUILD_LOCK_SECONDS
    ):
        rebuild_later(plan, version)
    return Lookup(_response(entry, time.time() - entry["built_at"]), version)


def _response(entry: dict[str, Any], age: float) -> HttpResponse:
    response = HttpResponse(entry["body"])
    for name, value in entry["headers"]:
        response[name] = value
    response["Age"] = str(int(age))
    return response


def store(plan: Plan, version: str, response: HttpResponseBase) -> None:
    """Keep the response for the next visitors when it is a plain, cookie-free 200."""
    if response.status_code == 200 and isinstance(response, HttpResponse) and not response.cookies:
        headers = [(name, value) for name, value in response.items() if name.lower() not in SKIPPED_HEADERS]
        entry = {"version": version, "built_at": time.time(), "body": response.content, "headers": headers}
        shared_cache().set(plan.key, entry, KEEP_SECONDS)
    shared_cache().delete_many([f"{plan.key}:rebuilding", f"{plan.key}:asked"])


# ---------------------------------------------------------------- rebuilding out of the request

#: Hands rebuilds over one at a time per process, off the event loop and the views' thread: sends
#: them to the site worker (shared cache), or builds them here (a cache of this process's own).
_rebuilder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="page-rebuild")
_local = threading.local()


def rebuild_later(plan: Plan, version: str) -> Future[None]:
    if rebuilds_on_worker():
        return _rebuilder.submit(send_rebuild, plan, version)
    return _rebuilder.submit(rebuild_here, plan, version)


def send_rebuild(plan: Plan, version: str) -> None:
    """Queue the rebuild for the site worker, which stores the page where every web process reads
    it. Built in this process instead when the worker was asked before and has not stored it since
    (``ASKED_SECONDS``), or when the broker cannot be reached: the page still follows."""
    from leaderboard.dispatch.enqueue import celery_app

    if not shared_cache().add(f"{plan.key}:asked", 1, ASKED_SECONDS):
        _log.warning(
            "the site worker has not rebuilt %s in %s s; building it here", plan.key, REBUILD_LOCK_SECONDS
        )
        rebuild_here(plan, version)
        return
    try:
        celery_app().send_task(REBUILD_TASK, args=[page_message(plan)])
    except Exception:  # kombu's connection errors vary by transport
        _log.warning("could not queue the rebuild of %s for the site worker; building it here", plan.key,
                     exc_info=True)
        rebuild_here(plan, version)


def page_message(plan: Plan) -> dict[str, str]:
    """What the site worker is told: the page's URL only. It derives the rest (cache key, data
    version) as for a visitor's request: a message on the broker never names a cache key, a cookie
    or a page that is not cached for anonymous visitors."""
    environ = plan.environ
    return {"scheme": environ["wsgi.url_scheme"], "host": environ["HTTP_HOST"], "path": environ["PATH_INFO"],
            "query": environ["QUERY_STRING"]}


def plan_of_message(message: Any) -> Plan | None:
    """The plan of the page a ``page_message`` names, checked as a visitor's request is (an
    anonymous GET of a cacheable page with only the parameters it reads, on an allowed host);
    None for anything else."""
    fields = ("scheme", "host", "path", "query")
    if (
        not isinstance(message, dict)
        or set(message) != set(fields)
        or not all(isinstance(message[name], str) for name in fields)
        or message["scheme"] not in ("http", "https")
    ):
        return None
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": message["path"], "QUERY_STRING": message["query"],
               "HTTP_HOST": message["host"], "SERVER_NAME": "rebuild", "SERVER_PORT": "0",
               "wsgi.url_scheme": message["scheme"], "wsgi.input": io.BytesIO()}
    try:
        return plan_for(WSGIRequest(environ))
    except UnicodeError:
        return None


def rebuild_if_out_of_date(plan: Plan) -> bool:
    """The site worker's rebuild: under the data version read now (before the rows the page is
    built from), unless the stored copy is fresh already (a second request for the same page)."""
    found = shared_cache().get_many([plan.key, *plan.versions])
    version = data_version(found, plan.versions)
    if plan.fresh(found.get(plan.key), version):
        shared_cache().delete_many([f"{plan.key}:rebuilding", f"{plan.key}:asked"])
        return False
    rebuild(plan, version)
    return True


def rebuild_here(plan: Plan, version: str) -> None:
    """``rebuild`` in this process's background thread, whose database connection is its own."""
    try:
        rebuild(plan, version)
    finally:
        connections.close_all()  # this thread's own connection: never left open between rebuilds


def rebuild(plan: Plan, version: str) -> None:
    """Build the page as an anonymous GET through the whole (sync) middleware chain, and store it."""
    handler = getattr(_local, "handler", None)
    if handler is None:
        handler = _local.handler = BaseHandler()
        handler.load_middleware(is_async=False)
    request = WSGIRequest({**plan.environ, "wsgi.input": io.BytesIO()})
    store(plan, version, handler.get_response(request))


class AnonymousPageCacheMiddleware(HybridMiddleware):
    def call(self, request: HttpRequest) -> Any:
        plan = plan_for(request)
        if plan is None:
            return self.get_response(request)
        found = lookup(plan)
        if found.response is not None:
            return found.response
        response = self.get_response(request)
        store(plan, found.version, response)
        return response

    async def acall(self, request: HttpRequest) -> HttpResponseBase:
        plan = plan_for(request)
        pending: Awaitable[HttpResponseBase]
        if plan is None:
            pending = self.get_response(request)
            return await pending
        # thread_sensitive=False: not the one thread every sync view of this process runs in.
        found = await sync_to_async(lookup, thread_sensitive=False)(plan)
        if found.response is not None:
            return found.response
        pending = self.get_response(request)
        response = await pending
        await sync_to_async(store, thread_sensitive=False)(plan, found.version, response)
        return response


# ---------------------------------------------------------------- in front of Django's ASGI handler


class AnonymousPageCacheASGI:
    """The same cache in front of the ASGI application (``leaderboard.asgi``): a page that is
    stored is sent without Django's request cycle (its request signals, the middleware's hops
    between threads), which costs more than the lookup itself. Everything else, misses included,
    goes to the application, where the middleware builds and stores it.

    The lookup runs on the event loop: one round trip to the cache (local memory or Redis on the
    site's network, well under a millisecond), cheaper than handing it to a thread."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        response = cached_response(scope) if scope["type"] == "http" and scope["method"] == "GET" else None
        if response is None:
            await self.application(scope, receive, send)
            return
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()
        ]
        headers.append((b"content-length", str(len(response.content)).encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": response.content})


def cached_response(scope: dict[str, Any]) -> HttpResponse | None:
    plan = plan_for(ASGIRequest(scope, io.BytesIO()))
    return lookup(plan).response if plan is not None else None
