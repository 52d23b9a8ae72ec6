"""``python -m evaluator import-problems --format FORMAT DIR [--out DIR]``: convert problems written
for SOL-ExecBench or GPU MODE's reference-kernels into catalogue folders (docs/importing.md).

Each problem is reported as it finishes (on stdout; with --json on stderr, the JSON report on
stdout at the end). Exit 0 when nothing was refused, 1 when at least one problem was, 2 when DIR
holds no problem of that format (or does not exist).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HELP = "import problems from SOL-ExecBench or GPU MODE reference-kernels (convert, validate, report)"

EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2


def add_import_options(parser: Any) -> None:
    """The options this command and ``manage import_problems`` share."""
    from evaluator.importers import FORMATS
    from evaluator.importers.bounded import MEMORY_BUDGET_MIB, TIME_BUDGET_S

    parser.add_argument("source", type=Path, metavar="DIR", help="one problem folder, or a tree of them")
    parser.add_argument(
        "--format", required=True, choices=FORMATS, dest="fmt", help="the format DIR is written in"
    )
    parser.add_argument("--out", type=Path, default=None,
                        help="where problem folders are written (default: the catalogue's imported folder, "
                        "$SOLBOARD_IMPORTED_PROBLEMS or evaluator/problems/imported)")
    parser.add_argument("--dry-run", action="store_true", help="convert and validate, write nothing")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace an earlier import of the same problem whose meaning changed (version + 1)",
    )
    parser.add_argument("--prefix", default="", help="put this before every problem name (e.g. gpumode_)")
    parser.add_argument(
        "--atol",
        type=float,
        default=None,
        help="reference-kernels: the atol of tasks whose tolerance cannot be read from their check",
    )
    parser.add_argument("--rtol", type=float, default=None, help="reference-kernels: their rtol")
    parser.add_argument(
        "--source-repo",
        default=None,
        help="the upstream repository [import] source records (default: the checkout's origin)",
    )
    parser.add_argument("--time-budget", type=float, default=TIME_BUDGET_S, metavar="SECONDS",
                        help=f"each problem's time limit (default {TIME_BUDGET_S:g})")
    parser.add_argument("--memory-budget", type=int, default=MEMORY_BUDGET_MIB, metavar="MIB",
                        help=f"each problem's resident-memory limit (default {MEMORY_BUDGET_MIB})")
    parser.add_argument("--jobs", type=int, default=1, help="problems converted at once (default 1)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def options_from(args: Any) -> Any:
    from evaluator.importers import Options

    return Options(
        dry_run=args.dry_run,
        replace=args.replace,
        prefix=args.prefix,
        atol=args.atol,
        rtol=args.rtol,
        source_repo=args.source_repo,
        time_budget_s=args.time_budget,
        memory_budget_mib=args.memory_budget,
        jobs=args.jobs,
    )


def progress_printer(stream: Any, detailed: bool, dry_run: bool) -> Any:
    """A progress callback: every outcome as it comes (all its lines, or one line)."""

    def show(outcome: Any, done: int, total: int) -> None:
        lines = outcome.lines(dry_run) if detailed else outcome.lines(dry_run)[:1]
        print(f"[{done}/{total}] " + "\n".join(lines), file=stream, flush=True)

    return show


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_import_options(parser)


def main(args: argparse.Namespace) -> int:
    from evaluator.importers import as_json, discover, import_problems

    if not args.source.exists():
        print(f"import-problems: no such folder: {args.source}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not discover(args.fmt, args.source):
        marker = "definition.json" if args.fmt == "sol-execbench" else "task.yml"
        print(f"import-problems: no {args.fmt} problem (no {marker}) under {args.source}", file=sys.stderr)
        return EXIT_BAD_INPUT
    show = progress_printer(sys.stderr if args.json else sys.stdout, not args.json, args.dry_run)
    report = import_problems(args.fmt, args.source, args.out, options_from(args), progress=show)
    print(as_json(report) if args.json else report.summary_line())
    return EXIT_REFUSED if report.refused else 0
