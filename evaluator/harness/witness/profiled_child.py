"""The process Nsight Compute profiles for the witness: untrusted, like the timing child.

``ncu ... python -m evaluator.harness.witness.profiled_child --socket NAME``. It connects to the judge on
an abstract Unix socket (ncu sits between the two processes, so no pipe is inherited), moves its
own stdout/stderr to a log file first (ncu's output, which the judge reads, is its stdout), imports
the submission, and on each command calls the kernel on the judge's buffers between two marker
kernels. ncu measures every kernel; the judge attributes them to calls by the markers and checks
every call's outputs itself (``witness``). Nothing this process says is trusted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from evaluator.harness import channel, work
from evaluator.harness.shared import Mapped
from evaluator.harness.submission import SubmissionError, load
from evaluator.problems import get_problem

#: Cycles of the marker kernel (torch's spin_kernel): short, and named unlike any cuBLAS kernel.
MARKER_CYCLES = 1000


def _quiet_stdio(log: Path) -> None:
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def marker() -> None:
    torch.cuda._sleep(MARKER_CYCLES)


class WitnessChild:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.device_ready = False
        first = channel.read_frame(fd)
        if first.get("type") == "prepare":
            # A warm spare's session: the CUDA context is made now, while the GPU is idle and no
            # job exists, instead of after its job's ranked stage (NcuSession.prepare).
            self.prepare_device()
            self.send({"type": "prepared"})
            first = channel.read_frame(fd)
        self.config = first
        self.problem = get_problem(self.config["problem"])
        self.mapped = Mapped()
        self.kernel: Any = None
        self.bound: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    def send(self, message: dict[str, Any]) -> None:
        channel.write_all(self.fd, channel.encode(message))

    def prepare_device(self) -> None:
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        import cuda.bindings.runtime  # noqa: F401 - CUDA IPC

        self.device_ready = True

    def run(self) -> None:
        if not self.device_ready:
            self.prepare_device()
        spec = self.config.get("spec")
        try:
            self.submission = load(self.config["language"], Path(self.config["file"]),
                                   Path(spec) if spec else None, self.problem, "cuda")
        except SubmissionError as error:
            self.send({"type": "compile_error", "message": error.message})
            return
        self.send({"type": "ready"})
        while True:
            command = channel.read_frame(self.fd)
            kind = command.get("type")
            if kind == "finish":
                torch.cuda.synchronize()
                return
            handler = {"bind": self.bind, "call": self.call, "unbind": self.unbind}.get(str(kind))
            if handler is None:
                raise channel.ChannelError(f"unexpected command {kind!r}")
            handler(command)

    def bind(self, command: dict[str, Any]) -> None:
        axes = dict(self.problem.shape(command["shape"]).axes)
        inputs, outputs = self.mapped.open_all(command["inputs"]), self.mapped.open_all(command["outputs"])
        try:
            kernel = work.kernel_for_shape(self.submission, self.problem, self.config["language"], axes)
        except Exception as error:  # reported, the judge decides
            self.send({"type": "bound", "error": str(error)})
            return
        self.kernel, self.bound = kernel, (inputs, outputs)
        self.send({"type": "bound"})

    def call(self, command: dict[str, Any]) -> None:
        assert self.bound is not None
        inputs, outputs = self.bound
        try:
            marker()
            self.kernel(*inputs, *outputs)
            marker()
            torch.cuda.synchronize()
        except Exception as error:  # reported, the judge decides
            self.send({"type": "called", "error": f"{type(error).__name__}: {error}"})
            return
        self.send({"type": "called"})

    def unbind(self, command: dict[str, Any]) -> None:
        self.bound, self.kernel = None, None
        self.mapped.close_all()
        self.send({"type": "unbound"})


def _import_before_connecting() -> None:
    """CUDA IPC's module, imported before the process connects: a warm spare accepts the
    connection while another job may run on the GPU, and asks for the device only afterwards
    (``prepare``); importing it makes no CUDA call."""
    with contextlib.suppress(ImportError):  # the device's preparation reports it
        import cuda.bindings.runtime  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    _quiet_stdio(Path(args.log))
    code = 0
    try:
        _import_before_connecting()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect("\0" + args.socket)
        WitnessChild(connection.fileno()).run()
    except channel.ChannelError:
        code = 0
    except BaseException:  # logged for the judge
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
