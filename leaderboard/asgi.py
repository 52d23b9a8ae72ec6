from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
django_application = get_asgi_application()

from leaderboard.web.pagecache import AnonymousPageCacheASGI  # noqa: E402 - needs the apps loaded

# Anonymous visitors' home and problem pages are answered from the page cache before Django's
# request cycle starts (leaderboard/web/pagecache.py); everything else is Django's.
application = AnonymousPageCacheASGI(django_application)
