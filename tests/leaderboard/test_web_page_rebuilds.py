"""Who rebuilds an out-of-date anonymous page, and which pages a result makes out of date.

- A result makes its own problem's pages and the home page out of date, not the other problems'
  pages (each rebuild is paid only where the result shows).
- Under ASGI every request uses the process's one cache object (Django's ``cache`` is one per
  asyncio task: a new Redis connection per request).
- With a shared page cache (``SOLBOARD_CACHE_URL``) the rebuild goes to the site worker as the
  ``leaderboard.rebuild_page`` task, which builds and stores the page; the web process only serves
  stored pages. The message names the page's URL only; the worker refuses anything that is not a
  page cached for anonymous visitors (a cache key, a cookie, another page). A worker that has not
  stored the page when the lock runs out, or a broker that cannot be reached, and the web process
  builds it itself.

The cast (tests/conftest.py): alice and bob submit; the client is an anonymous visitor.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import time
from typing import Any

import pytest
from django.core.cache import cache, caches
from django.test import Client

from leaderboard.web import cache as web_cache
from leaderboard.web import pagecache
from leaderboard.web.tasks import rebuild_page
from tests.leaderboard.web_helpers import ranked

pytestmark = pytest.mark.django_db


class FakeCelery:
    """Records what would be sent to the broker (or fails as an unreachable one does)."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.fail = fail

    def send_task(self, name: str, args: list[Any], **options: Any) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.sent.append((name, json.loads(json.dumps(args))))  # what the worker receives is JSON


@pytest.fixture
def shared(settings: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A shared page cache (as with Redis), a fake broker, and the rebuilds the web process would
    have done itself, recorded (a thread of its own cannot see a test's uncommitted rows)."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 60
    settings.SOLBOARD_CACHE_URL = (
        "redis://cache.invalid:6379/2"  # only the switch: the test cache stays local
    )
    cache.clear()
    celery = FakeCelery()
    built_here: list[tuple[pagecache.Plan, str]] = []
    monkeypatch.setattr("leaderboard.dispatch.enqueue.celery_app", lambda: celery)
    monkeypatch.setattr(pagecache, "rebuild_here", lambda plan, version: built_here.append((plan, version)))
    return {"celery": celery, "built_here": built_here}


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def ranked_users(html: str) -> list[str]:
    table = html[html.index('data-board="problem"'):]
    return re.findall(r'data-row="ranked" data-user="(\w+)"', table[: table.index("</table>")])


def stale_visit(client: Client, url: str) -> Any:
    """Visit a page, then wait until the hand-over thread has done what the visit gave it."""
    response = client.get(url)
    pagecache._rebuilder.submit(lambda: None).result(timeout=30)  # one thread: after everything before it
    return response


def test_a_result_makes_its_own_problem_pages_and_the_home_page_out_of_date_not_the_others(
        client: Client, alice: Any, bob: Any, catalogue: None, shared: dict[str, Any],
        django_capture_on_commit_callbacks: Any) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    ranked(alice, "softmax", "h200", 1.2)
    for url in ("/", "/problems/vector_add/?gpu=h200", "/problems/softmax/?gpu=h200"):
        client.get(url)
    with django_capture_on_commit_callbacks(execute=True):
        ranked(bob, "vector_add", "h200", 1.5)
    for url in ("/", "/problems/vector_add/?gpu=h200", "/problems/softmax/?gpu=h200"):
        stale_visit(client, url)
    asked = [message["path"] for _, [message] in shared["celery"].sent]
    assert sorted(asked) == ["/", "/problems/vector_add/"]


def test_with_a_shared_cache_the_site_worker_rebuilds_the_page(
    client: Client,
    alice: Any,
    bob: Any,
    catalogue: None,
    shared: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    client.get("/problems/vector_add/?gpu=h200")
    with django_capture_on_commit_callbacks(execute=True):
        ranked(bob, "vector_add", "h200", 1.5)
    stale = stale_visit(client, "/problems/vector_add/?gpu=h200")
    assert ranked_users(stale.content.decode()) == [
        "alice"
    ]  # the old copy while the worker builds the new one
    again = stale_visit(client, "/problems/vector_add/?gpu=h200")
    assert ranked_users(again.content.decode()) == ["alice"]
    [(task, [message])] = shared["celery"].sent  # asked once, however many visitors
    assert task == "leaderboard.rebuild_page" and shared["built_here"] == []
    assert message == {
        "scheme": "http",
        "host": "testserver",
        "path": "/problems/vector_add/",
        "query": "gpu=h200",
    }
    assert rebuild_page(message) == "rebuilt"  # as the site worker runs it
    fresh = client.get("/problems/vector_add/?gpu=h200")
    assert fresh["Age"] == "0" and ranked_users(fresh.content.decode()) == ["bob", "alice"]
    key = "web:page:http:problem:vector_add?gpu=h200"
    assert cache.get(f"{key}:rebuilding") is None and cache.get(f"{key}:asked") is None
    assert rebuild_page(message) == "fresh already"  # a second request for the same page costs nothing


@pytest.mark.parametrize(
    "message",
    [
        {"scheme": "http", "host": "testserver", "path": "/users/alice/", "query": ""},  # not a cached page
        {"scheme": "http", "host": "evil.example", "path": "/", "query": ""},  # not an allowed host
        {"scheme": "http", "host": "testserver", "path": "/problems/vector_add/", "query": "gpu=h200&utm=x"},
        {"scheme": "http", "host": "testserver", "path": "/", "query": "", "HTTP_COOKIE": "sessionid=stolen"},
        {
            "scheme": "http",
            "host": "testserver",
            "path": "/",
            "query": "",
            "key": "django.contrib.sessions.cache1",
        },
        {"scheme": "gopher", "host": "testserver", "path": "/", "query": ""},
        ["http", "testserver", "/", ""],
    ],
)
def test_the_worker_refuses_a_message_that_names_no_anonymous_page(
    message: Any, catalogue: None, shared: dict[str, Any]
) -> None:
    assert rebuild_page(message) == "refused"
    assert not [key for key in cache._cache if "web:page" in key]  # type: ignore[attr-defined]


def test_a_page_the_worker_has_not_stored_when_the_lock_runs_out_is_built_by_the_web_process(
        client: Client, catalogue: None, shared: dict[str, Any]) -> None:
    client.get("/")
    key = "web:page:http:home:?"
    cache.set(key, {**cache.get(key), "built_at": time.time() - 61})
    stale_visit(client, "/")
    assert len(shared["celery"].sent) == 1 and shared["built_here"] == []
    cache.delete(f"{key}:rebuilding")  # the lock runs out; the worker never stored the page
    stale_visit(client, "/")
    assert len(shared["celery"].sent) == 1 and [plan.key for plan, _ in shared["built_here"]] == [key]


def test_a_broker_that_cannot_be_reached_leaves_the_rebuild_to_the_web_process(
        client: Client, catalogue: None, shared: dict[str, Any]) -> None:
    shared["celery"].fail = True
    client.get("/")
    key = "web:page:http:home:?"
    cache.set(key, {**cache.get(key), "built_at": time.time() - 61})
    stale_visit(client, "/")
    assert [plan.key for plan, _ in shared["built_here"]] == [key]


def test_without_a_shared_cache_the_web_process_rebuilds_it(client: Client, catalogue: None,
                                                            shared: dict[str, Any], settings: Any) -> None:
    settings.SOLBOARD_CACHE_URL = ""  # each process has its own cache: the worker's copy would reach nobody
    client.get("/")
    key = "web:page:http:home:?"
    cache.set(key, {**cache.get(key), "built_at": time.time() - 61})
    stale_visit(client, "/")
    assert shared["celery"].sent == [] and [plan.key for plan, _ in shared["built_here"]] == [key]


def test_every_request_of_the_asgi_front_uses_the_process_cache_object(
    client: Client, catalogue: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = client.get("/problems/vector_add/?gpu=h200")
    made: list[str] = []
    real = caches.create_connection
    monkeypatch.setattr(caches, "create_connection", lambda alias: made.append(alias) or real(alias))
    monkeypatch.setattr(web_cache, "_shared", None)
    sent: list[dict[str, Any]] = []

    async def never_called(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a stored page must not reach the application")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/problems/vector_add/", "query_string": b"gpu=h200",
             "headers": [(b"host", b"testserver")], "scheme": "http", "root_path": ""}
    front = pagecache.AnonymousPageCacheASGI(never_called)

    async def visitors() -> None:  # one task per request, as uvicorn runs them
        await asyncio.gather(*(asyncio.create_task(front(scope, None, send)) for _ in range(5)))

    contextvars.Context().run(asyncio.run, visitors())  # tasks whose context never held a cache, as uvicorn's
    assert [message["body"] for message in sent if "body" in message] == [built.content] * 5
    assert made == ["default"]
