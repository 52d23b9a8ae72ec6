from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluator.problems import CatalogueError
from leaderboard.sync import sync_problems


class Command(BaseCommand):
    help = "Mirror the problem catalogue (evaluator/problems) into the database; idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = sync_problems()
        except CatalogueError as error:  # a malformed data file: say which, without a traceback
            raise CommandError(str(error)) from error
        for line in report.lines():
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS("problems changed") if report.changed else "problems unchanged")
