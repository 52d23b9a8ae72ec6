"""``solboard`` client subcommands: argument parsing, and one exit status per kind of outcome
(``solboard_client/helptext.py`` words them; docs/api.md lists them)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from evaluator.vocabulary import DEFAULT_MODE, DEVICES, LANGUAGES, MODES
from solboard_client import account, commands, local, native
from solboard_client import commands as c
from solboard_client.helptext import COMMAND_HELP, epilog
from solboard_client.output import Output
from solboard_client.transport import ApiFailure, ServiceFailure

COMMANDS = ("login", "whoami", "problems", "problem", "submit", "status", "report", "cancel", "rerun",
            "submissions", "quota", "leaderboard", "check", "run")
#: The site's modes and popcorn-cli's names for them (``commands.MODE_OF``).
SUBMIT_MODES = tuple(commands.MODE_OF)


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples and exit statuses as written; each option's default shown where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return f"{text} (default: {action.default})".strip()


def _kernel_options(parser: argparse.ArgumentParser, gpu_required: bool = True) -> None:
    parser.add_argument("file", help="the kernel's source (.py, .ptx, .cu), UTF-8 text")
    parser.add_argument("--problem", required=True, help="the problem's name (solboard problems)")
    parser.add_argument("--language", choices=LANGUAGES, help="default: from the file extension, else python")
    parser.add_argument("--spec", help="launch spec file (PTX/CUDA); may instead sit in the source's header")
    if gpu_required:
        parser.add_argument("--gpu", action="append", required=True,
                            help="GPU type (repeat for several): h100, h200, b200, or cpu where offered")


def _wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="follow it to the end, then print the report")
    parser.add_argument(
        "--no-runner-timeout",
        type=float,
        default=c.NO_RUNNER_TIMEOUT_S,
        metavar="S",
        help="with --wait: stop (exit 5) once no runner has served its GPU type for S seconds",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="with --wait: stop (exit 5) after S seconds (default: wait as long as runners work on it)",
    )


def _add(
    sub: argparse._SubParsersAction, name: str, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    found = COMMAND_HELP[name]
    return sub.add_parser(name, parents=[common], help=found.summary, description=found.description,  # type: ignore[no-any-return]
                          epilog=epilog(name), formatter_class=Formatter)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    output = common.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON document at the end")
    output.add_argument(
        "--jsonl", action="store_true", help="one JSON event per line, as it happens (agents)"
    )
    common.add_argument("--server", help="server URL (default: SOLBOARD_SERVER, then the stored login)")
    parser = argparse.ArgumentParser(prog="solboard", parents=[common], formatter_class=Formatter,
                                     epilog=epilog("submit").split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    login = _add(sub, "login", common)
    login.add_argument("--token", help="an existing token (else: username and password)")
    login.add_argument("--username", help="default: SOLBOARD_USERNAME, else asked on a terminal")
    login.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input (else SOLBOARD_PASSWORD, "
        "else asked on a terminal)",
    )
    for name in ("whoami", "problems", "quota"):
        _add(sub, name, common)
    problem = _add(sub, "problem", common)
    problem.add_argument("name")
    native.add_options(problem)
    submit = _add(sub, "submit", common)
    _kernel_options(submit)
    submit.add_argument("--mode", choices=SUBMIT_MODES, default=DEFAULT_MODE, help="see modes below")
    _wait_options(submit)
    submit.add_argument("--idempotency-key", help="default: a fresh one per invocation (safe retries)")
    status = _add(sub, "status", common)
    status.add_argument("id", type=int, help="the submission id")
    _wait_options(status)
    for name in ("report", "cancel"):
        _add(sub, name, common).add_argument("id", type=int, help="the submission id")
    rerun = _add(sub, "rerun", common)
    rerun.add_argument("id", type=int, help="the submission id")
    rerun.add_argument("--gpu", action="append", help="default: every GPU type it ran on")
    rerun.add_argument("--mode", choices=SUBMIT_MODES, help="default: the latest run's")
    _wait_options(rerun)
    mine = _add(sub, "submissions", common)
    mine.add_argument("--problem", help="only this problem's")
    mine.add_argument("--limit", type=int, default=20, help="rows per page")
    mine.add_argument("--page", type=int, default=1, help="page number")
    board = _add(sub, "leaderboard", common)
    board.add_argument("problem")
    board.add_argument("--gpu", action="append", help="default: every GPU type")
    board.add_argument("--shape", help="a shape's ranking (by time) instead of the overall one (by score)")
    board.add_argument("--features", action="store_true", help="only results that use the required features")
    board.add_argument(
        "--problem-version", type=int, help="an earlier catalogue version's ranking (default: current)"
    )
    board.add_argument("--page", type=int, default=1, help="page number")
    board.add_argument("--limit", type=int, default=20, help="rows per page")
    board.add_argument("--references", action="store_true",
                       help="also the reference lines (eager, torch.compile, library kernels): never ranked")
    _kernel_options(_add(sub, "check", common))
    run = _add(sub, "run", common)
    _kernel_options(run, gpu_required=False)
    run.add_argument("--device", choices=DEVICES, help="default: cuda when a GPU is visible")
    run.add_argument("--mode", choices=MODES, default=DEFAULT_MODE, help="see modes below")
    return parser


HANDLERS: dict[str, Callable[[argparse.Namespace, Output], int]] = {
    "login": account.login,
    "whoami": account.whoami,
    "quota": account.quota,
    "submissions": account.submissions,
    "problems": c.problems,
    "problem": native.problem,
    "submit": c.submit,
    "status": c.status,
    "report": c.report,
    "cancel": c.cancel,
    "rerun": c.rerun,
    "leaderboard": c.leaderboard,
    "check": c.check,
    "run": local.run,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Output.of(args)
    try:
        return HANDLERS[args.command](args, out)
    except ApiFailure as failure:
        code = c.EXIT_RETRY_LATER if failure.status == 429 else (
            c.EXIT_KERNEL if failure.code in c.KERNEL_CODES else c.EXIT_REFUSED)
        retry = f"retry after {failure.retry_after} s" if failure.status == 429 else ""
        return out.error(args.command, failure.code, str(failure), code, retry)
    except ServiceFailure as failure:
        return out.error(args.command, "service_unavailable", str(failure), c.EXIT_SERVICE)
    except BrokenPipeError:  # `solboard problems | head`: the reader left, nothing is wrong
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (so the interpreter's final flush is silent)
        return c.EXIT_OK
    except OSError as error:  # a file that cannot be read
        return out.error(args.command, "unreadable_file", str(error), c.EXIT_REFUSED)
    except KeyboardInterrupt:
        return 130


__all__ = ["COMMANDS", "build_parser", "commands", "main"]

if __name__ == "__main__":
    sys.exit(main())
