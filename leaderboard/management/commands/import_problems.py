"""``solboard manage import_problems --format {sol-execbench,reference-kernels} DIR``.

Converts the problems found under DIR into catalogue folders with the evaluator's importer
(evaluator/importers, docs/importing.md): each is validated like a native problem and written only
when it passes. Then, when they were written to the folder the catalogue reads, the catalogue is
mirrored into the database as ``sync_problems`` does. Converting runs the problems' reference code,
so this needs torch (the runner extra); a web host without torch can run
``python -m evaluator import-problems`` elsewhere, ship the folders, and ``sync_problems``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Import problems written for SOL-ExecBench or GPU MODE reference-kernels: convert, validate, write, "
        "then sync the catalogue; reports what was converted, partially converted or refused."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        from evaluator.commands.import_cmd import add_import_options

        add_import_options(parser)
        parser.add_argument("--no-sync", action="store_true", help="write the folders but leave the database")

    def handle(self, *args: Any, **options: Any) -> None:
        from evaluator.commands.import_cmd import options_from, progress_printer
        from evaluator.importers import discover, import_problems
        from evaluator.problems import CatalogueError, imported_dir, load_catalogue

        try:
            import torch  # noqa: F401  (the references run on the CPU to validate each problem)
        except ImportError as error:
            raise CommandError(
                "import_problems runs the problems' reference code and needs torch "
                "(pip install -e '.[runner]'); or run `python -m evaluator import-problems` where torch is "
                "installed and `sync_problems` here"
            ) from error
        source: Path = options["source"]
        fmt: str = options["fmt"]
        if not source.exists():
            raise CommandError(f"no such folder: {source}")
        if not discover(fmt, source):
            raise CommandError(f"no {fmt} problem under {source}")
        show = progress_printer(self.stderr if options["json"] else self.stdout, not options["json"],
                                options["dry_run"])
        report = import_problems(
            fmt, source, options["out"], options_from(SimpleNamespace(**options)), progress=show
        )
        sync: dict[str, Any] = {"synced": False, "reason": "", "lines": []}
        if options["dry_run"]:
            sync["reason"] = "dry run"
        elif options["no_sync"]:
            sync["reason"] = "--no-sync"
        elif Path(report.out).resolve() != imported_dir().resolve():
            sync["reason"] = f"{report.out} is not the folder the catalogue reads ({imported_dir()})"
        elif not report.written:
            sync["reason"] = "nothing written"
        else:
            from leaderboard.sync import sync_problems

            load_catalogue.cache_clear()
            try:
                result = sync_problems()
            except CatalogueError as error:
                raise CommandError(str(error)) from error
            sync.update(synced=True, lines=result.lines(), changed=result.changed)
        if options["json"]:
            self.stdout.write(json.dumps({"import": report.to_dict(), "sync": sync}, indent=2))
        else:
            self.stdout.write(report.summary_line())
            if sync["synced"]:
                for line in sync["lines"]:
                    self.stdout.write(f"sync: {line}")
                self.stdout.write(
                    self.style.SUCCESS("problems changed") if sync.get("changed") else "problems unchanged"
                )
            else:
                self.stdout.write(f"not synced: {sync['reason']}")
        if report.refused:
            raise CommandError(f"{len(report.refused)} problem(s) refused (see the report)")
