"""``manage.py sweep [--loop SECONDS]``: release evaluations never handed to the broker, requeue
or fail those whose runner is gone (leaderboard/dispatch/sweep.py)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from leaderboard.dispatch import sweep


class Command(BaseCommand):
    help = "Re-enqueue stuck evaluations and requeue or fail those of lost runners."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", type=float, metavar="SECONDS", help="Sweep forever, every SECONDS.")

    def handle(self, *args: Any, **options: Any) -> None:
        while True:
            report = sweep()
            self.stdout.write(
                f"released {report.released}, requeued {report.requeued}, failed {report.failed}"
            )
            if not options["loop"]:
                return
            time.sleep(options["loop"])
