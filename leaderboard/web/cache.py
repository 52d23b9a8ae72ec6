"""Caching of what every visitor sees alike: whole pages for anonymous visitors
(``leaderboard.web.pagecache``) and the ranking boards and home tables inside the pages of
signed-in ones (``cached_fragment``).

Each cached piece is stored with the *data version* it was built from: a token per problem, one
for the pages that show every problem (the home page) and one for the whole site. Storing a
result, a change of ranking rows, an operator's withdrawal or a catalogue sync of a problem
replaces that problem's token and the every-problem token (the receivers at the bottom): that
problem's pages and the home page are out of date at once, so a new result shows on the next visit,
while the other problems' pages stay as they are. A change that names no problem replaces the
site's token, which every piece depends on. What can change without such an event (the home
page's queue depths, the chart's right edge at "now") is rebuilt once it is older than
``SOLBOARD_WEB_CACHE_SECONDS`` (10 s; 0 switches all caching off; problem pages:
``SOLBOARD_WEB_PAGE_SECONDS``).

The versions live in the cache itself: shared by every web process and the site worker when
``SOLBOARD_CACHE_URL`` names a Redis database (production) or a folder (``file:///...``: what
``make run`` uses, so the site worker's results reach the web server's pages); per process
otherwise (local memory: the tests), where only the interval applies across processes.

Everything here goes through ``shared_cache()``, one cache object per process: Django's
``django.core.cache.cache`` is one object per thread *and per asyncio task* (asgiref's ``Local``),
so under ASGI every request would build its own Redis client and connection pool and open a new
connection (with redis-py's greeting: extra round trips, and a read of the package's metadata),
about 1.5 ms of CPU per request on a page that is otherwise served in 0.3 ms.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.base import BaseCache
from django.core.signals import setting_changed
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from leaderboard.models import Problem
from leaderboard.signals import evaluation_finished, rankings_changed

SITE_VERSION = "web:version:site"
#: Replaced by a change to any problem: the pieces that show every problem (the home page).
EVERY_PROBLEM_VERSION = "web:version:every-problem"
#: Pieces not touched for this long leave the cache (and the stale copy served during a rebuild).
KEEP_SECONDS = 3600


_shared: BaseCache | None = None


def shared_cache() -> BaseCache:
    """The default cache as one object for the whole process, its connection pool kept for the
    life of the process (redis-py's pool and locmem's lock make it safe to share between threads)."""
    global _shared
    if _shared is None:
        _shared = caches.create_connection(DEFAULT_CACHE_ALIAS)
    return _shared


@receiver(setting_changed, dispatch_uid="leaderboard.web.cache.setting_changed")
def _caches_changed(setting: str, **kwargs: Any) -> None:
    global _shared
    if setting == "CACHES":
        _shared = None


def rebuilds_on_worker() -> bool:
    """Production's cache (Redis, shared by many web processes): the site worker rebuilds an
    out-of-date page while the web processes serve the stored copy. Otherwise (one development
    web process) the web process rebuilds it itself."""
    return str(settings.SOLBOARD_CACHE_URL).startswith(("redis://", "rediss://", "unix://"))


def problem_version(name: str) -> str:
    return f"web:version:problem:{name}"


def version_keys(problem_name: str | None) -> list[str]:
    """What a piece depends on: the site version, and its problem's when it shows one problem,
    else every problem's (the home page)."""
    return [SITE_VERSION, problem_version(problem_name) if problem_name else EVERY_PROBLEM_VERSION]


def data_version(found: dict[str, Any], keys: Iterable[str]) -> str:
    """The version tokens of ``keys`` as read in ``found`` (a missing token reads as '0')."""
    return "/".join(str(found.get(key, "0")) for key in keys)


def pages_changed(problem_name: str | None) -> None:
    """Make every piece that shows this problem out of date (its own pages and the home page, not
    the other problems' pages); every piece when no problem is named."""
    token = uuid.uuid4().hex
    keys = [problem_version(problem_name), EVERY_PROBLEM_VERSION] if problem_name else [SITE_VERSION]
    shared_cache().set_many({key: token for key in keys}, timeout=None)


def cached_fragment(key: str, template: str, build: Callable[[], dict[str, Any]],
                    problem_name: str | None = None) -> SafeString:
    """``template`` rendered with ``build()``; from the cache while its data version holds and it
    is younger than the interval."""
    if settings.SOLBOARD_WEB_CACHE_SECONDS <= 0:
        return mark_safe(render_to_string(template, build()))
    keys = version_keys(problem_name)
    found = shared_cache().get_many([key, *keys])
    version = data_version(found, keys)
    entry = found.get(key)
    if isinstance(entry, tuple) and entry[0] == version:
        return mark_safe(entry[1])
    html = render_to_string(template, build())
    shared_cache().set(key, (version, html), settings.SOLBOARD_WEB_CACHE_SECONDS)
    return mark_safe(html)


# ---------------------------------------------------------------- what makes pieces out of date


def _after_commit(problem_filter: dict[str, Any]) -> None:
    """Bump once the change is visible to other connections (a rebuild before the commit would
    read the old rows and store them under the new version)."""
    def bump() -> None:
        name = Problem.objects.filter(**problem_filter).values_list("name", flat=True).first()
        pages_changed(name)

    transaction.on_commit(bump, robust=True)


@receiver(evaluation_finished, dispatch_uid="leaderboard.web.cache.evaluation_finished")
def _evaluation_finished(sender: Any, evaluation: Any, **kwargs: Any) -> None:
    _after_commit({"submissions__evaluations": evaluation.pk})


@receiver(rankings_changed, dispatch_uid="leaderboard.web.cache.rankings_changed")
def _rankings_changed(sender: Any, problem_id: int, **kwargs: Any) -> None:
    _after_commit({"pk": problem_id})


@receiver(post_save, sender=Problem, dispatch_uid="leaderboard.web.cache.problem_saved")
def _problem_saved(sender: Any, instance: Problem, **kwargs: Any) -> None:
    _after_commit({"pk": instance.pk})
