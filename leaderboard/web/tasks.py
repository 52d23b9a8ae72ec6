"""The site worker's page rebuilds (registered through ``leaderboard.tasks``).

A web process that finds an anonymous page out of date keeps serving the stored copy and sends
this task (``leaderboard.web.pagecache.send_rebuild``) when the page cache is shared: the page is
built here, in the worker, and stored where every web process reads it. The message names the
page's URL only; cache key, data version and the anonymous request are derived here."""

from __future__ import annotations

import logging
from typing import Any

from leaderboard.celery import site_task
from leaderboard.web import pagecache
from solboard_common.protocol import SITE_QUEUE

_log = logging.getLogger(__name__)


@site_task(
    name=pagecache.REBUILD_TASK, queue=SITE_QUEUE, time_limit=60, soft_time_limit=45, ignore_result=True
)
def rebuild_page(page: Any) -> str:
    """Build the page the message names (``pagecache.page_message``: its URL only) as an anonymous
    GET, and store it; a message that names no cacheable anonymous page is refused (anyone who can
    write to the broker could send one)."""
    plan = pagecache.plan_of_message(page)
    if plan is None:
        _log.warning("page rebuild refused: %.200r is not a page cached for anonymous visitors", page)
        return "refused"
    return "rebuilt" if pagecache.rebuild_if_out_of_date(plan) else "fresh already"
