"""Short-lived caching of rendered page parts that every visitor sees alike (ranking boards, the
home page's tables): the same HTML for everyone for ``SOLBOARD_WEB_CACHE_SECONDS`` (default 10 s),
so a busy ranking page costs its queries once per interval per server process, not per visit.

What depends on the visitor (the header, the owner's row highlight, a report) is never cached. A
new result therefore shows on the rankings within that interval; 0 switches caching off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe


def cached_fragment(key: str, template: str, build: Callable[[], dict[str, Any]]) -> SafeString:
    """``template`` rendered with ``build()``, from the cache when rendered within the interval."""
    seconds = settings.SOLBOARD_WEB_CACHE_SECONDS
    if seconds > 0:
        found = cache.get(key)
        if found is not None:
            return mark_safe(found)
    html = render_to_string(template, build())
    if seconds > 0:
        cache.set(key, html, seconds)
    return mark_safe(html)
