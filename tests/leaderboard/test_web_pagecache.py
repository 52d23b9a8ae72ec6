"""The page cache: anonymous visitors' home and problem pages are served whole from the cache,
go out of date the moment a result changes them, are rebuilt in the background while the old copy
is served, and never hold anything of one visitor for another.

The cast (tests/conftest.py): alice and bob submit; "visitor" is an anonymous client.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from leaderboard.web import pagecache
from tests.leaderboard.web_helpers import ranked

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def handed(settings: Any, monkeypatch: Any) -> list[tuple[pagecache.Plan, str]]:
    """The rebuilds handed to the background thread, which the tests then run themselves: a thread
    of its own has its own database connection, which cannot see a test's uncommitted rows."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 60
    cache.clear()
    calls: list[tuple[pagecache.Plan, str]] = []
    monkeypatch.setattr(pagecache, "rebuild_later", lambda plan, version: calls.append((plan, version)))
    return calls


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def ranked_users(html: str) -> list[str]:
    table = html[html.index('data-board="problem"'):]
    return re.findall(r'data-row="ranked" data-user="(\w+)"', table[: table.index("</table>")])


def test_an_anonymous_page_is_served_from_the_cache_with_its_age(client: Client, alice: Any,
                                                                catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    first = client.get("/problems/vector_add/?gpu=h200")
    assert "Age" not in first
    second = client.get("/problems/vector_add/?gpu=h200")
    assert second["Age"] == "0" and second.content == first.content
    assert second["X-Frame-Options"] == first["X-Frame-Options"] == "DENY"


def test_a_new_result_makes_the_page_out_of_date_at_once(
    client: Client,
    alice: Any,
    bob: Any,
    catalogue: None,
    handed: list[Any],
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.SOLBOARD_CACHE_URL = (
        "redis://cache.invalid:6379/2"  # production's switch; the test cache stays local
    )
    ranked(alice, "vector_add", "h200", 1.2)
    assert ranked_users(client.get("/problems/vector_add/?gpu=h200").content.decode()) == ["alice"]
    with django_capture_on_commit_callbacks(execute=True):
        ranked(bob, "vector_add", "h200", 1.5)  # the site bumps the problem's data version on commit
    stale = client.get("/problems/vector_add/?gpu=h200")
    assert ranked_users(stale.content.decode()) == ["alice"]  # the old copy while the rebuild runs...
    assert len(handed) == 1
    pagecache.rebuild(*handed[0])  # ...as the background thread does
    assert ranked_users(client.get("/problems/vector_add/?gpu=h200").content.decode()) == ["bob", "alice"]


def test_in_development_the_visit_after_a_new_result_shows_it(
    client: Client,
    alice: Any,
    bob: Any,
    catalogue: None,
    handed: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    assert ranked_users(client.get("/problems/vector_add/?gpu=h200").content.decode()) == ["alice"]
    with django_capture_on_commit_callbacks(execute=True):
        ranked(bob, "vector_add", "h200", 1.5)
    fresh = client.get("/problems/vector_add/?gpu=h200")
    assert ranked_users(fresh.content.decode()) == ["bob", "alice"] and "Age" not in fresh
    assert handed == []  # built in the request, stored for the visitors after it
    assert client.get("/problems/vector_add/?gpu=h200")["Age"] == "0"


def _pending_rebuild(path: str, query: str) -> tuple[pagecache.Plan, str]:
    """The plan and data version the background thread was handed (tests share one database
    connection, which a thread of its own cannot see into)."""
    request = Client().get(f"{path}?{query}").wsgi_request
    plan = pagecache.plan_for(request)
    assert plan is not None
    return plan, pagecache.lookup(plan).version


def test_signed_in_visitors_and_pending_messages_bypass_the_page_cache(client: Client, alice: Any,
                                                                       catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    client.get("/problems/vector_add/?gpu=h200")
    client.force_login(alice)
    mine = client.get("/problems/vector_add/?gpu=h200")
    assert "Age" not in mine and 'tr[data-user="alice"]' in mine.content.decode()
    visitor = Client()
    visitor.cookies["messages"] = "something"
    assert "Age" not in visitor.get("/problems/vector_add/?gpu=h200")


def test_unknown_or_repeated_parameters_are_built_and_never_stored(client: Client, catalogue: None) -> None:
    for query in ("gpu=h200&utm=<script>", "gpu=h200&gpu=h100", "gpu=" + "x" * 40):
        client.get(f"/problems/vector_add/?{query}")
        assert "Age" not in client.get(f"/problems/vector_add/?{query}")
    assert not [key for key in cache._cache if "utm" in key]  # type: ignore[attr-defined]


def test_an_anonymous_page_carries_no_csrf_token_or_cookie(client: Client, catalogue: None) -> None:
    response = client.get("/")
    assert "csrftoken" not in response.cookies and "X-CSRFToken" not in response.content.decode()
    assert "csrftoken" in client.get("/accounts/login/").cookies  # a page with a form still gets its token
    assert "Age" in client.get("/")


def test_the_asgi_front_serves_a_stored_page_without_django(client: Client, catalogue: None) -> None:
    built = client.get("/problems/vector_add/?gpu=h200")
    sent: list[dict[str, Any]] = []

    async def never_called(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a stored page must not reach the application")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/problems/vector_add/", "query_string": b"gpu=h200",
             "headers": [(b"host", b"testserver")], "scheme": "http", "root_path": ""}
    asyncio.run(pagecache.AnonymousPageCacheASGI(never_called)(scope, None, send))
    assert sent[0]["status"] == 200 and sent[1]["body"] == built.content
    assert (b"x-frame-options", b"DENY") in sent[0]["headers"]


def test_a_page_older_than_the_interval_is_served_once_more_while_one_rebuild_is_handed_over(
        client: Client, catalogue: None, handed: list[Any]) -> None:
    client.get("/")
    plan, _ = _pending_rebuild("/", "")
    cache.set(plan.key, {**cache.get(plan.key), "built_at": time.time() - 61})
    assert int(client.get("/")["Age"]) >= 61 and int(client.get("/")["Age"]) >= 61
    assert [item[0].key for item in handed] == [plan.key]  # one rebuild, however many visitors
    pagecache.rebuild(*handed[0])
    assert client.get("/")["Age"] == "0" and cache.get(f"{plan.key}:rebuilding") is None


def test_a_problem_page_outlives_the_short_interval_until_its_own(client: Client, catalogue: None,
                                                                  handed: list[Any], settings: Any) -> None:
    settings.SOLBOARD_WEB_PAGE_SECONDS = 300  # only a result (a new data version) ends it sooner
    client.get("/problems/vector_add/?gpu=h200")
    plan, _ = _pending_rebuild("/problems/vector_add/", "gpu=h200")
    cache.set(plan.key, {**cache.get(plan.key), "built_at": time.time() - 61})
    client.get("/problems/vector_add/?gpu=h200")
    assert handed == []
    cache.set(plan.key, {**cache.get(plan.key), "built_at": time.time() - 301})
    client.get("/problems/vector_add/?gpu=h200")
    assert [item[0].key for item in handed] == [plan.key]
