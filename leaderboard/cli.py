"""The ``solboard`` command. Imports nothing from Django or torch until a subcommand needs it.

    solboard runner [...]   a runner node (runners/cli.py): consumes gpu.<type>.x<n> queues
    solboard dev [...]      the local supervisor behind `make run`: web + site worker + runner
    solboard manage [...]   Django's manage.py
    solboard login|whoami|problems|problem|submit|status|report|cancel|rerun|submissions|quota|...
                            the API client (solboard_client/): HTTP only, no Django
"""

from __future__ import annotations

import importlib
import os
import sys

USAGE = """usage: solboard COMMAND [args...]

  runner       start a runner node (see `solboard runner --help`)
  dev          migrate, sync the catalogue and GPU types, then run web + site worker + runner
  manage       Django management commands (migrate, sync_problems, create_api_token, ...)

API client (`solboard COMMAND --help` for examples, defaults and exit statuses; SOLBOARD_SERVER /
SOLBOARD_TOKEN override the stored login; --json or --jsonl on every command):
  login        store a token for a server          whoami       who the server says you are
  problems     list the problems                   problem      one problem: shapes, t_SOL
  submit       submit a kernel [--wait]            status       a submission's status [--wait]
  report       its full report                     cancel       cancel what is still queued
  rerun        re-run your submission              submissions  your submissions, newest first
  quota        your quotas                         leaderboard  rankings of a problem
  check        dry run of every upload check       run          the evaluator, locally
"""


#: Subcommands of the API client (solboard_client/, no Django import).
CLIENT_COMMANDS = frozenset(("login", "whoami", "problems", "problem", "submit", "status", "report", "cancel",
                             "rerun", "submissions", "quota", "leaderboard", "check", "run"))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "runner":
        return _runner(rest)
    if command == "dev":
        from leaderboard.devserver import main as dev_main

        return dev_main(rest)
    if command == "manage":
        return _manage(rest)
    if command in CLIENT_COMMANDS:
        from solboard_client.main import main as client_main

        return client_main(args)
    print(f"solboard: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


def _runner(args: list[str]) -> int:
    try:
        runner_cli = importlib.import_module("runners.cli")
    except ModuleNotFoundError as error:
        if error.name != "runners.cli":
            raise
        print("solboard runner: the runner node is not installed in this tree (runners/cli.py is missing)",
              file=sys.stderr)
        return 2
    result = runner_cli.main(args)
    return int(result or 0)


def _manage(args: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["solboard manage", *args])
    return 0


if __name__ == "__main__":
    sys.exit(main())
