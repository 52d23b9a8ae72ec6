from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from leaderboard.api.webhooks import resend_due


class Command(BaseCommand):
    help = "Queue every pending webhook delivery whose next try is due (after a broker lost a retry)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"queued {resend_due()} due webhook deliveries")
