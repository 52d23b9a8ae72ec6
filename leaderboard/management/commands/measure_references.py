from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.models import GpuType, Problem
from leaderboard.reference_lines import NotTheSystemAccount, measure_references


class Command(BaseCommand):
    help = (
        "Submit the problems' reference lines (the eager baseline, torch.compile, library kernels) to the "
        "runners of the given GPU types, like submissions: labelled, never ranked; idempotent per problem "
        "version (docs/references.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--gpu", action="append", required=True, dest="gpus", metavar="KEY",
                            help="GPU type to measure on (repeat for several): h200, cpu, ...")
        parser.add_argument("--problem", action="append", dest="problems", metavar="NAME",
                            help="a problem (repeat for several); default: every active single-GPU problem")
        parser.add_argument("--label", action="append", dest="labels", metavar="LABEL",
                            help="only these lines: eager, torch_compile, liger, flash_attn, ...")
        parser.add_argument("--again", action="store_true",
                            help="submit again the lines that failed or were unavailable")

    def handle(self, *args: Any, **options: Any) -> None:
        gpus = list(GpuType.objects.filter(key__in=options["gpus"]))
        missing = sorted(set(options["gpus"]) - {gpu.key for gpu in gpus})
        if missing:
            raise CommandError(f"unknown GPU type(s): {', '.join(missing)} (manage.py sync_gpu_types)")
        problems = Problem.objects.filter(active=True, kind=Problem.Kind.SINGLE).order_by("name")
        if options["problems"]:
            problems = problems.filter(name__in=options["problems"])
            missing = sorted(set(options["problems"]) - {problem.name for problem in problems})
            if missing:
                raise CommandError(f"no active single-GPU problem named {', '.join(missing)}")
        try:
            done = measure_references(problems, gpus, options["labels"] or (), again=options["again"])
        except NotTheSystemAccount as error:
            raise CommandError(str(error)) from None
        for item in done:
            self.stdout.write(item.line())
        submitted = sum(item.outcome.startswith("submitted") for item in done)
        self.stdout.write(self.style.SUCCESS(f"{submitted} line(s) submitted") if submitted
                          else "nothing submitted: every line is measured or measuring")
