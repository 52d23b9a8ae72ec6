"""``python -m evaluator SUBCOMMAND ...``: the command line runners, the site and tests call.

Each subcommand lives in its own small module under ``evaluator/commands/`` with

- ``HELP: str``: one line for ``--help``,
- ``add_arguments(parser: argparse.ArgumentParser) -> None``,
- ``main(args: argparse.Namespace) -> int``: the exit status.

To add a subcommand, write its module and add ONE line to ``COMMANDS``. Every module is imported
when the parser is built, so keep module-level imports light: import torch (and anything heavy)
inside ``main``. That is what lets ``problems`` and ``sol`` run where torch is not installed
(tests/evaluator/test_sol.py checks that they never import it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

#: (subcommand, module). Keep this order: it is the order of ``--help``.
COMMANDS: list[tuple[str, str]] = [
    ("problems", "evaluator.commands.problems_cmd"),
    ("sol", "evaluator.commands.sol_cmd"),
    ("run", "evaluator.commands.run_cmd"),
    ("serve-spare", "evaluator.commands.spare_cmd"),
    ("calibrate", "evaluator.commands.calibrate_cmd"),
    ("schema", "evaluator.commands.schema_cmd"),
    ("check-ptx", "evaluator.commands.check_ptx_cmd"),
    ("import-problems", "evaluator.commands.import_cmd"),
]


def _load(module_name: str) -> ModuleType:
    module = importlib.import_module(module_name)
    for attribute in ("HELP", "add_arguments", "main"):
        if not hasattr(module, attribute):
            raise AttributeError(f"{module_name} lacks {attribute}: see evaluator/cli.py")
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description="SOLboard kernel evaluator.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS:
        module = _load(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
