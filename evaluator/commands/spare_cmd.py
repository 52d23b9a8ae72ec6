"""``python -m evaluator serve-spare --device D``: a warm spare, the process of a job not yet known.

It starts in two parts (``evaluator/harness/single/warm.py``). First it stages: the judge, the untrusted
child and, on a GPU, the witness session start and import what they need without touching the
device; it prints ``staged`` (``evaluator/jobstream.py``) and waits on stdin for one line,
``{"warm": true}``, which the runner sends once no job runs on the GPU. Then it warms its device
(CUDA contexts, profiler, BLAS handles), prints ``ready`` and waits for exactly one job: one JSON
line ``{"run": [ARGS], "secret_seed": N}``, where ARGS are the arguments ``python -m evaluator
run`` would get (the secret seed travels in the line instead of on stdin). It runs that job as
``run --stream`` would, prints its report and exits: a spare never serves a second job.

It prints ``not_ready`` and exits with ``EXIT_NOT_READY`` (75), having run nothing of any job,
when its start failed, its child or its witness process died or spoke unasked while it waited,
no word came within ``--idle-limit`` seconds, a line was not the one expected, or stdin closed
without a job. The runner then starts another spare, or runs the job as a fresh process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evaluator import jobstream
from evaluator.commands import run_cmd
from evaluator.vocabulary import COMPILE_LIMIT_S, CUDA, DEVICES

if TYPE_CHECKING:
    from evaluator.harness.single.warm import WarmStart

HELP = "a warm spare: start a job's processes before the job exists, then run the one job read from stdin"

#: A spare nobody used for this long exits (the runner replaces spares well before: runners/spares.py).
IDLE_LIMIT_S = 3600.0
#: The job line holds arguments and a seed, never the source (that is a file in the scratch folder).
REQUEST_MAX_BYTES = 1 << 20
#: How often the waiting spare checks that its witness process is still alive.
CHECK_EVERY_S = 1.0
#: The runner's word, once no job runs on the spare's GPU: make the device's contexts now.
WARM_WORD = {"warm": True}


@dataclass(frozen=True)
class JobRequest:
    args: argparse.Namespace
    secret_seed: int | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default=CUDA)
    parser.add_argument("--idle-limit", type=float, default=IDLE_LIMIT_S, metavar="S",
                        help="exit (not ready) when no job came within S seconds of being ready")
    parser.add_argument("--start-limit", type=float, default=COMPILE_LIMIT_S, metavar="S",
                        help="the warm-up must be done within S seconds")


def main(args: argparse.Namespace) -> int:
    from evaluator.harness import process_tree
    from evaluator.harness.single.warm import SpareFailed, stage, warm_device

    # As ``run``: this process exists for one job; no process of the job may read its memory, and
    # orphans of its children come back to it. (Nothing here imports torch yet: the child starts
    # first and imports its own while the judge imports the judge's, ``warm.stage``.)
    process_tree.own_process_tree()
    process_tree.not_dumpable()
    process_tree.become_subreaper()
    try:
        warm = stage(args.device, args.start_limit)
    except SpareFailed as error:
        return not_ready(str(error))
    jobstream.emit("staged", device=args.device, pid=os.getpid(), start_up_seconds=warm.start_up)
    stdin = LineReader(0)
    problem = wait_for_warm_word(warm, stdin, args.idle_limit)
    if problem is None:
        try:
            warm_device(warm, args.start_limit)
        except SpareFailed as error:
            return not_ready(str(error))
        jobstream.emit("ready", device=args.device, pid=os.getpid(), start_up_seconds=warm.start_up)
        outcome = wait_for_job(warm, stdin, args.idle_limit)
        problem = outcome if isinstance(outcome, str) else None
    if problem is not None:
        warm.close()
        return not_ready(problem)
    assert not isinstance(outcome, str)
    return run_the_job(warm, outcome)


def run_the_job(warm: WarmStart, request: JobRequest) -> int:
    if request.args.device != warm.device:
        warm.close()
        return not_ready(f"a {request.args.device} job for a {warm.device} spare")
    problem = warm.problem()  # once more: its child may have died while the job line arrived
    if problem is not None:
        warm.close()
        return not_ready(problem)
    request.args.stream = True  # stdout is the event stream from the first line on
    code = run_cmd.run_job(request.args, request.secret_seed, warm)
    if code == run_cmd.EXIT_INTERNAL and warm.child_lost:  # it died as the job was handed over
        return not_ready("its child died as the job was handed over, before the submission was imported")
    return code


def not_ready(reason: str) -> int:
    with contextlib.suppress(OSError):
        jobstream.emit("not_ready", reason=reason[-4000:])
    return jobstream.EXIT_NOT_READY


class LineReader:
    """Whole lines from a descriptor, read as they come (two lines may arrive in one read)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def line(self) -> bytes | None:
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def read_some(self) -> str | None:
        """Read what is there; why reading must stop, or None."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.closed = True
            return "stdin closed without a job"
        self.buffer += chunk
        if len(self.buffer) > REQUEST_MAX_BYTES:
            return f"the job line exceeds {REQUEST_MAX_BYTES} bytes"
        return None


def next_line(warm: WarmStart, stdin: LineReader, idle_limit_s: float) -> bytes | str:
    """The next line on stdin, or why there is none. While waiting, the child's channel is
    watched: it speaks only when asked, so anything there (or its end) means it is not fit."""
    deadline = time.monotonic() + idle_limit_s
    while (line := stdin.line()) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return f"no word came within its idle limit of {idle_limit_s:g} s"
        readable, _, _ = select.select(
            [stdin.fd, warm.child.from_child], [], [], min(remaining, CHECK_EVERY_S)
        )
        if warm.child.from_child in readable or not readable:
            problem = warm.problem()
            if problem is not None:
                return problem
        if stdin.fd in readable:
            stopped = stdin.read_some()
            if stopped is not None:
                return stopped
    return line


def wait_for_warm_word(warm: WarmStart, stdin: LineReader, idle_limit_s: float) -> str | None:
    """The runner's word that the GPU is free for this spare's contexts, or why it did not come."""
    line = next_line(warm, stdin, idle_limit_s)
    if isinstance(line, str):
        return line
    try:
        word = json.loads(line)
    except ValueError:
        word = None
    return None if word == WARM_WORD else "the line after staging was not the word to warm up"


def wait_for_job(warm: WarmStart, stdin: LineReader, idle_limit_s: float) -> JobRequest | str:
    """The one job from stdin, or why there is none."""
    line = next_line(warm, stdin, idle_limit_s)
    return line if isinstance(line, str) else parse_request(line)


def parse_request(line: bytes) -> JobRequest | str:
    try:
        data = json.loads(line)
    except ValueError as error:
        return f"the job line is not JSON ({error})"
    run_args, seed = (data.get("run"), data.get("secret_seed")) if isinstance(data, dict) else (None, None)
    if not (isinstance(run_args, list) and all(isinstance(item, str) for item in run_args)):
        return "the job line has no list of run arguments"
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        return "the job line's secret seed is not an integer"
    parser = argparse.ArgumentParser(prog="python -m evaluator run", exit_on_error=False)
    run_cmd.add_arguments(parser)
    try:
        args = parser.parse_args(run_args)
    except (argparse.ArgumentError, SystemExit) as error:
        return f"the job's run arguments do not parse ({error})"
    if args.secret_seed_stdin:
        return "a spare's job brings its secret seed in the job line, not on stdin"
    return JobRequest(args, seed)
