from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluator.gpu_specs import GpuSpecError
from leaderboard.sync import sync_gpu_types


class Command(BaseCommand):
    help = "Mirror evaluator/gpus.toml (GPU types and their peaks) into the database; idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = sync_gpu_types()
        except GpuSpecError as error:  # a malformed data file: say which, without a traceback
            raise CommandError(str(error)) from error
        for line in report.lines():
            self.stdout.write(line)
        self.stdout.write(
            self.style.SUCCESS("GPU types changed") if report.changed else "GPU types unchanged"
        )
