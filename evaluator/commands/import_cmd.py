"""``python -m evaluator import-problems --format FORMAT DIR [--out DIR]``: convert problems written
for SOL-ExecBench or GPU MODE's reference-kernels into catalogue folders (docs/importing.md).

Exit 0 when nothing was refused, 1 when at least one problem was, 2 when DIR holds no problem of
that format (or does not exist).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "import problems from SOL-ExecBench or GPU MODE reference-kernels (convert, validate, report)"

EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from evaluator.importers import FORMATS

    parser.add_argument("source", type=Path, metavar="DIR", help="one problem folder, or a tree of them")
    parser.add_argument("--format", required=True, choices=FORMATS, help="the format DIR is written in")
    parser.add_argument("--out", type=Path, default=None,
                        help="where problem folders are written (default: the catalogue's imported folder, "
                        "$SOLBOARD_IMPORTED_PROBLEMS or evaluator/problems/imported)")
    parser.add_argument("--dry-run", action="store_true", help="convert and validate, write nothing")
    parser.add_argument("--replace", action="store_true",
                        help="replace an earlier import of the same problem whose source changed (version + 1)")
    parser.add_argument("--prefix", default="", help="put this before every problem name (e.g. gpumode_)")
    parser.add_argument("--atol", type=float, default=None,
                        help="reference-kernels: the atol of tasks whose check_implementation is custom code")
    parser.add_argument("--rtol", type=float, default=None, help="reference-kernels: their rtol")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace) -> int:
    from evaluator.importers import discover, import_problems

    if not args.source.exists():
        print(f"import-problems: no such folder: {args.source}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not discover(args.format, args.source):
        marker = "definition.json" if args.format == "sol-execbench" else "task.yml"
        print(f"import-problems: no {args.format} problem (no {marker}) under {args.source}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = import_problems(args.format, args.source, args.out, dry_run=args.dry_run, replace=args.replace,
                             prefix=args.prefix, atol=args.atol, rtol=args.rtol)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return EXIT_REFUSED if report.refused else 0
