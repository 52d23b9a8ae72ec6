from __future__ import annotations

from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"

    def ready(self) -> None:
        # Signal receivers: every process that can end an evaluation (web, site worker) owes webhooks.
        from leaderboard.api import webhooks  # noqa: F401

        # ... and the website's cached pages go out of date when results or rankings change.
        from leaderboard.web import cache  # noqa: F401
