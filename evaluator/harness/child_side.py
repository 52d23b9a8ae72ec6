"""What every untrusted process of a job does the same way: one child of a single-device job
(``single.child``) or one rank of a multi-GPU job (``multi.rank_child``).

It answers the judge over two file descriptors (``channel``), maps and unmaps the buffers the judge
lends (``shared``), calls the bound kernel on them and reports what its framing checks saw. Nothing
it says is a verdict in the submission's favour (docs/security.md). Its classes are in the integrity
snapshot with every other harness module (``anticheat.harness_modules``), so a submission that
patches a method here is caught like one that patches the child's own.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from evaluator.harness import channel
from evaluator.harness.correctness import check_identity, identity
from evaluator.harness.shared import Mapped
from evaluator.harness.submission import LoadedSubmission
from evaluator.problems import Problem
from evaluator.vocabulary import Status

#: Taken before the submission is imported: the child leaves by it whatever the submission patched.
_os_exit = os._exit
#: Exit status of a child whose harness (not the submission) failed; the judge says so.
INTERNAL_ERROR_EXIT = 70


class ChildSide(ABC):
    """The conversation both kinds of child share; each fills in its checks and its kernel."""

    problem: Problem

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.mapped = Mapped()
        self.cold: Any = None
        self.submission: LoadedSubmission | None = None
        self.kernel: Callable[..., Any] | None = None
        self.bound: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    def send(self, message: dict[str, Any]) -> None:
        channel.write_all(self.wfd, channel.encode(message))

    def receive(self) -> dict[str, Any]:
        return channel.read_frame(self.rfd)

    @abstractmethod
    def sync(self) -> None:
        """Wait for the device (the rank's own GPU in a multi-GPU job)."""

    def unbind(self, command: dict[str, Any]) -> None:
        self.bound, self.kernel = None, None
        gc.collect()
        self.mapped.close_all()
        self.send({"type": "unbound"})

    def call(self, command: dict[str, Any]) -> None:
        """One call of the bound kernel on the judge's buffers; the judge checks the outputs."""
        assert self.bound is not None and self.kernel is not None, "call before bind"
        inputs, outputs = self.bound
        ids = [identity(tensor) for tensor in outputs]
        try:
            returned = self.kernel(*inputs, *outputs)
            self.sync()
        except Exception as error:  # the submission's error, reported as such
            self.send({"type": "called", "error": f"the kernel raised {type(error).__name__}: {error}",
                       **self.failed_call_facts()})
            return
        busy = self.call_problem()
        status, problem = (Status.REJECTED, busy) if busy else self._changed_outputs(outputs, ids)
        note = (f"kernel returned a {type(returned).__name__}; ignored (outputs are written in place)"
                if returned is not None else "")
        self.send({"type": "called", "problem": problem, "problem_status": status, "note": note})

    def failed_call_facts(self) -> dict[str, Any]:
        """What the judge needs to know about a call that raised (the single child: a lost context)."""
        return {}

    @abstractmethod
    def call_problem(self) -> str | None:
        """What the framing checks saw during the call (threads, processes, environment), or None."""

    def _changed_outputs(
        self, outputs: list[torch.Tensor], ids: list[Any]
    ) -> tuple[Status | None, str | None]:
        """An output object the kernel changed (dtype, shape, storage): its writes never reached the
        judge's buffer; saying how is better feedback than the judge's NaNs."""
        for spec, tensor, expected in zip(self.problem.outputs, outputs, ids, strict=True):
            bad = check_identity(spec.name, tensor, expected)
            if bad:
                return bad
        return None, None


def path_of(text: str) -> Any:
    from pathlib import Path

    return Path(text)


def numel(axes: dict[str, int]) -> int:
    total = 1
    for value in axes.values():
        total *= max(int(value), 1)
    return total


def serve(make_child: Callable[[int, int], Any], argv: list[str] | None = None) -> None:
    """A child process's whole life: run the conversation on the fds the judge gave, log a
    harness failure for the judge, and leave by ``os._exit`` (no atexit hook of the submission's)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    args = parser.parse_args(argv)
    code = 0
    try:
        make_child(args.in_fd, args.out_fd).run()
    except channel.ChannelError:
        code = 0  # the judge hung up: nothing left to say
    except BaseException:  # a harness failure: the judge reports it with this log
        traceback.print_exc()
        code = INTERNAL_ERROR_EXIT
    for stream in (sys.stdout, sys.stderr):
        # The submission may have replaced or closed them; a bare try, since it may have replaced
        # contextlib's helpers too.
        try:  # noqa: SIM105
            stream.flush()
        except Exception:
            pass
    _os_exit(code)
