"""``solboard`` client subcommands: argument parsing, and one exit status per kind of outcome.

Exit statuses: 0 success; 1 your kernel failed (refused at upload, or an evaluation failed, timed
out or was rejected); 2 the request was refused (usage, authentication, not found, conflict);
3 the service failed (unreachable, 5xx, an evaluation ended without a verdict); 4 a quota is spent
(retry after the time printed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from evaluator.vocabulary import LANGUAGES, MODES
from solboard_client import commands as c
from solboard_client import local, native
from solboard_client.transport import ApiFailure, ServiceFailure

COMMANDS = ("login", "problems", "problem", "submit", "status", "report", "cancel", "rerun", "leaderboard",
            "check", "run")


def _kernel_options(parser: argparse.ArgumentParser, gpu_required: bool = True) -> None:
    parser.add_argument("file", help="the kernel's source (.py, .ptx, .cu)")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--language", choices=LANGUAGES, help="default: from the file extension")
    parser.add_argument("--spec", help="launch spec file (PTX/CUDA)")
    if gpu_required:
        parser.add_argument("--gpu", action="append", required=True,
                            help="GPU type (repeat for several): h100, h200, b200, or cpu where offered")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--server", help="server URL (default: SOLBOARD_SERVER, then the stored login)")
    parser = argparse.ArgumentParser(prog="solboard", parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    login = sub.add_parser("login", parents=[common], help="store a token for a server (file mode 0600)")
    login.add_argument("--token", help="an existing token (else: username and password)")
    login.add_argument("--username")
    sub.add_parser("problems", parents=[common], help="list the problems")
    problem = sub.add_parser("problem", parents=[common], help="one problem: shapes, t_SOL; its native ABI")
    problem.add_argument("name")
    native.add_options(problem)
    submit = sub.add_parser("submit", parents=[common], help="submit a kernel")
    _kernel_options(submit)
    submit.add_argument("--mode", choices=MODES, default="test")
    submit.add_argument("--wait", action="store_true", help="follow it to the end, then print the report")
    submit.add_argument("--idempotency-key", help="default: a fresh one per invocation (safe retries)")
    for name, text in (("status", "a submission's status"), ("report", "a submission's full report"),
                       ("cancel", "cancel what is still queued or running")):
        sub.add_parser(name, parents=[common], help=text).add_argument("id", type=int)
    rerun = sub.add_parser("rerun", parents=[common], help="re-run one of your submissions")
    rerun.add_argument("id", type=int)
    rerun.add_argument("--gpu", action="append")
    rerun.add_argument("--mode", choices=MODES)
    rerun.add_argument("--wait", action="store_true")
    board = sub.add_parser("leaderboard", parents=[common], help="rankings of a problem")
    board.add_argument("problem")
    board.add_argument("--gpu", action="append", help="default: every GPU type")
    board.add_argument("--shape", help="a shape's ranking (by time) instead of the overall one (by score)")
    board.add_argument("--features", action="store_true", help="only results that use the required features")
    board.add_argument("--problem-version", type=int, help="an earlier catalogue version's ranking (default: current)")
    board.add_argument("--page", type=int, default=1)
    board.add_argument("--limit", type=int, default=20)
    _kernel_options(sub.add_parser("check", parents=[common], help="dry run: every upload check, nothing saved"))
    run = sub.add_parser("run", parents=[common], help="evaluate locally with the same evaluator")
    _kernel_options(run, gpu_required=False)
    run.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when a GPU is visible")
    run.add_argument("--mode", choices=MODES, default="test")
    return parser


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "login": c.login, "problems": c.problems, "problem": native.problem, "submit": c.submit, "status": c.status,
    "report": c.report, "cancel": c.cancel, "rerun": c.rerun, "leaderboard": c.leaderboard, "check": c.check,
    "run": local.run,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return HANDLERS[args.command](args)
    except ApiFailure as failure:
        print(f"solboard {args.command}: {failure}", file=sys.stderr)
        if failure.status == 429:
            print(f"retry after {failure.retry_after} s", file=sys.stderr)
            return c.EXIT_RETRY_LATER
        return c.EXIT_KERNEL if failure.code in c.KERNEL_CODES else c.EXIT_REFUSED
    except ServiceFailure as failure:
        print(f"solboard {args.command}: {failure}", file=sys.stderr)
        return c.EXIT_SERVICE
    except BrokenPipeError:  # `solboard problems | head`: the reader left, nothing is wrong
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (so the interpreter's final flush is silent)
        return c.EXIT_OK
    except OSError as error:  # a file that cannot be read
        print(f"solboard {args.command}: {error}", file=sys.stderr)
        return c.EXIT_REFUSED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
