"""The child process: the only place the submission's code runs. Untrusted from its first import.

``python -m evaluator.harness.single.child --in-fd R --out-fd W``. The judge (``judge.py``) drives it
with commands over R and reads its answers on W (``channel``). Nothing the child says is taken as
a verdict in the submission's favour: the judge owns the buffers every call reads and writes
(``shared``), generates the inputs, checks the outputs itself, times the baseline itself, and has
every ranked median confirmed by a witness (``witness``). What the child still does:

- warms up its own torch, CUDA context, profiler and L2 controls BEFORE the submission exists, so
  the submission's import and calls can be checked against a quiet reference (``anticheat``);
- imports the submission on command and calls it on the judge's buffers on command;
- times the kernel on the judge's rotating sets (``timing`` / ``gpu_loop``): its figures are a
  claim the witness must confirm;
- reports what its own framing checks saw (patched callables, background threads, swapped
  outputs, side streams, persisting L2): a REJECTED it reports is against itself, so it stands.
"""

from __future__ import annotations

import contextlib
import sys
from time import monotonic
from typing import Any

import torch

from evaluator.harness import anticheat, channel, work
from evaluator.harness.child_side import ChildSide, numel, path_of, serve
from evaluator.harness.clock import PartClock
from evaluator.harness.correctness import poison_
from evaluator.harness.device import device_info, warm_blas
from evaluator.harness.submission import SubmissionError, load
from evaluator.harness.timing.loop import CallFailed, TimedSet, TimingConfig, TimingRejected, time_cpu
from evaluator.problems import get_problem
from evaluator.vocabulary import CPU, CUDA


class StopTiming(Exception):
    """The judge ended the timing (it found a wrong output, or the stage ran out)."""


class Child(ChildSide):
    def __init__(self, rfd: int, wfd: int) -> None:
        super().__init__(rfd, wfd)
        self.config: dict[str, Any] = {}
        self.device = "cpu"
        self.staged = False
        #: Seconds of its start-up by part, sent to the judge (a claim: informational).
        self.start_up: dict[str, float] = {}

    def sync(self) -> None:
        if self.device == CUDA:
            torch.cuda.synchronize()

    # ------------------------------------------------------------ before the submission

    def stage(self, device: str) -> None:
        """Everything of the start-up that touches no device: the modules the device's timing,
        L2 controls, profiler and CUDA IPC need, imported (loaded before the integrity snapshot).
        No CUDA call: a warm spare stages beside a running job, whose GPU must not see a context
        of it (``evaluator/harness/single/warm.py``)."""
        self.device = device
        if device == "cuda":
            import cuda.bindings.runtime  # noqa: F401 - CUDA IPC, used to map the judge's buffers
            import torch.profiler  # noqa: F401

            import evaluator.harness.timing.gpu_loop
            import evaluator.harness.timing.l2  # noqa: F401
        self.staged = True

    def warm_up_device(self) -> dict[str, float]:
        """Initialise everything that starts threads or loads libraries and needs no job: the
        CUDA context, the profiler, the L2 controls, CUDA IPC, the BLAS handles and the intra-op
        pool. A warm spare (``evaluator serve-spare``) does this before any job exists, once no job
        runs on its GPU. Returns the seconds of each part (``warm_up.*``)."""
        clock = PartClock()
        if self.device == CUDA:
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            clock.mark("context")
            from evaluator.harness.timing.l2 import ColdL2

            self.cold = ColdL2(torch.device("cuda"))
            clock.mark("l2")
            with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            ):
                torch.ones(16, device="cuda").add_(1)
            clock.mark("profiler")
        else:
            torch.set_num_threads(1)  # steadier wall-clock timing on a shared development machine
        anticheat.install_what_torch_compile_installs()
        spin = torch.randn(1 << 21)  # a parallel CPU op starts the intra-op pool now
        float((spin.double() - spin.double()).abs().sum())
        clock.mark("pool")
        warm_blas(self.device)
        clock.mark("blas")
        return clock.parts

    def warm_up_job(self) -> None:
        """What depends on the job: the problem's own baseline once (its libraries' threads), the
        PTX loader for native submissions. Still before the submission exists."""
        self._run_baseline_once()
        if self.config["language"] != "python":
            with contextlib.suppress(ImportError):
                import evaluator.ptx.loader  # noqa: F401 - imported now so its functions are snapshotted

    def _run_baseline_once(self) -> None:
        """Library threads (cuBLAS, cuDNN) start now, so they are part of the quiet reference."""
        shapes = [self.problem.shape(shape_id) for shape_id in self.config["shapes"]]
        if not shapes:
            return
        smallest = min(shapes, key=lambda shape: numel(shape.axes))
        axes = dict(smallest.axes)
        inputs = self.refmod.generate_inputs(axes, 0, self.device, self.problem.distributions[0])
        outputs = work.corr.allocate_outputs(self.problem.outputs, axes, self.device)
        baseline = work.with_scalar_args(self.refmod.baseline, self.problem, axes)
        baseline(*[inputs[spec.name] for spec in self.problem.inputs], *outputs.values())
        self.sync()

    # ------------------------------------------------------------ the conversation

    def run(self) -> None:
        """The warm-up steps, each on the judge's word: ``stage`` (imports, no device call; a
        warm spare's child may stop here while another job runs on its GPU) answered ``staged``,
        ``warm_up`` (the device; no job yet: a warm spare stops here until its job comes) answered
        ``warmed``, then ``config`` (the job) answered ``warm``; then the submission's import and
        the calls. A fresh job's child gets ``warm_up`` first and stages as part of it."""
        first = self.receive()
        if first.get("type") == "stage":
            self.stage_for_device(first)
            self.send({"type": "staged", "start_up_seconds": self.start_up})
            first = self.expect("warm_up")
        elif first.get("type") != "warm_up":
            raise channel.ChannelError(f"expected stage or warm_up, got {first.get('type')}")
        facts = self.warm_for_device(first)
        self.send({"type": "warmed", "start_up_seconds": self.start_up})
        self.warm_for_job(self.expect("config"))
        self.activity = anticheat.Activity.now()
        self.torch_state = anticheat.TorchState.capture()
        self.integrity = anticheat.standard_integrity(anticheat.harness_modules() + [sys.modules["__main__"]])
        self.send({"type": "warm", "device": facts, "start_up_seconds": self.start_up})
        # The CPU device's baseline is timed here before the import (cpu_baseline), then unbound.
        command = self.receive()
        while command.get("type") == "unbind" or (command.get("type") == "time" and command.get("baseline")):
            (self.time if command["type"] == "time" else self.unbind)(command)
            command = self.receive()
        if command.get("type") != "import":
            raise channel.ChannelError(f"expected import, got {command.get('type')}")
        if not self.import_submission():
            return
        while True:
            command = self.receive()
            kind = command.get("type")
            if kind == "finish":
                return
            handler = {"bind": self.bind, "call": self.call, "time": self.time, "unbind": self.unbind}.get(
                str(kind)
            )
            if handler is None:
                raise channel.ChannelError(f"unexpected command {kind!r}")
            handler(command)

    def stage_for_device(self, command: dict[str, Any]) -> None:
        """The start-up before any device call; times ``imports`` (from the judge's spawn) and
        ``stage`` (the device's modules)."""
        began = monotonic()
        self.start_up["imports"] = round(
            max(began - float(command.get("spawned_monotonic") or began), 0.0), 3
        )
        self.stage(str(command["device"]))
        self.start_up["stage"] = round(monotonic() - began, 3)

    def warm_for_device(self, command: dict[str, Any]) -> dict[str, Any]:
        """The job-independent start-up on the device; returns the device's facts. Times its parts:
        device_init, warm_up (and its parts, ``warm_up.*``)."""
        if str(command["device"]) != self.device or not self.staged:
            self.stage_for_device(command)
        began = monotonic()
        facts = device_info(self.device)
        self.start_up["device_init"] = round(monotonic() - began, 3)
        began = monotonic()
        parts = self.warm_up_device()
        self.start_up["warm_up"] = round(monotonic() - began, 3)
        self.start_up.update({f"warm_up.{name}": seconds for name, seconds in parts.items()})
        return facts

    def warm_for_job(self, config: dict[str, Any]) -> None:
        if config.get("device", self.device) != self.device:
            raise RuntimeError(f"the judge sent a {config.get('device')} job to a {self.device} child")
        began = monotonic()
        self.config = config
        self.problem = get_problem(config["problem"])
        self.refmod = self.problem.reference_module()
        self.warm_up_job()
        self.start_up["job_warm_up"] = round(monotonic() - began, 3)

    def expect(self, kind: str) -> dict[str, Any]:
        command = self.receive()
        if command.get("type") != kind:
            raise channel.ChannelError(f"expected {kind}, got {command.get('type')}")
        return command

    def import_submission(self) -> bool:
        spec = self.config.get("spec")
        try:
            self.submission = load(
                self.config["language"], path_of(self.config["file"]), path_of(spec) if spec else None,
                self.problem, self.device,
            )
        except SubmissionError as error:
            self.send({"type": "compile_error", "message": error.message})
            return False
        problem = self.framing_problem("import")
        self.send({"type": "imported", "problem": problem, "evidence": self.submission.evidence})
        return problem is None

    def framing_problem(self, stage: str) -> str | None:
        changed = self.integrity.changed()
        if changed:
            return f"patched {', '.join(changed[:8])} during {stage} (class 4)"
        busy = self.activity.problems(native=False)
        return f"{busy} (after {stage})" if busy else None

    # ------------------------------------------------------------ correctness calls

    def bind(self, command: dict[str, Any]) -> None:
        """Map one shape's input and output buffers and build the kernel for that shape."""
        self.bound = None
        axes = dict(self.problem.shape(command["shape"]).axes)
        inputs, outputs = self.mapped.open_all(command["inputs"]), self.mapped.open_all(command["outputs"])
        try:
            kernel = work.kernel_for_shape(self.submission, self.problem, self.config["language"], axes)
        except Exception as error:  # a native kernel that does not fit this shape
            self.send({"type": "bound", "error": getattr(error, "message", None) or str(error)})
            return
        self.kernel, self.bound = kernel, (inputs, outputs)
        self.send({"type": "bound"})

    def failed_call_facts(self) -> dict[str, Any]:
        return {"fatal": self.context_poisoned()}

    def call_problem(self) -> str | None:
        return self.activity.problems(native=False)

    def context_poisoned(self) -> bool:
        if self.device != CUDA:
            return False
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1).item()
        except Exception:  # any error here means the context is gone
            return True
        return False

    # ------------------------------------------------------------ timing

    def time(self, command: dict[str, Any]) -> None:
        """Time the kernel on the judge's sets; every refresh is a request to the judge."""
        axes = dict(self.problem.shape(command["shape"]).axes)
        if command.get("baseline") and self.submission is None:  # before the import: ours alone
            kernel = work.with_scalar_args(self.refmod.baseline, self.problem, axes)
        else:
            kernel = work.kernel_for_shape(self.submission, self.problem, self.config["language"], axes)
        sets = [self._timed_set(index, item) for index, item in enumerate(command["sets"])]
        config = TimingConfig(budget_s=float(command["budget_s"]),
                              launch_allowance_us=float(command["allowance_us"]),
                              gate_us=command.get("gate_us"))
        try:
            outcome = self._time(kernel, sets, config)
        except StopTiming:
            return  # the judge already knows why
        except TimingRejected as error:
            self.send({"type": "timed", "problem": str(error)})
            return
        except CallFailed as error:
            self.send({"type": "timed", "error": f"during timing: {error}", "fatal": self.context_poisoned()})
            return
        problem = self.framing_problem(f"the timing of {command['shape']}")
        self.send({"type": "timed", "stats": outcome.stats, "flags": outcome.flags, "notes": outcome.notes,
                   "problem": problem})

    def _time(self, kernel: Any, sets: list[TimedSet], config: TimingConfig) -> Any:
        if self.device == CUDA:
            from evaluator.harness.timing.gpu_loop import time_gpu

            return time_gpu(kernel, sets, config, self.cold, self.activity)
        return time_cpu(kernel, sets, config, self.activity)

    def _timed_set(self, index: int, item: dict[str, Any]) -> TimedSet:
        inputs, outputs = self.mapped.open_all(item["inputs"]), self.mapped.open_all(item["outputs"])

        def refresh() -> None:
            # The judge writes fresh inputs into this set and may first check the previous call.
            self.send({"type": "next", "set": index})
            answer = self.receive()
            if answer.get("type") != "go":
                raise StopTiming()

        def finished() -> None:
            # The call is over on the device: the judge stops its clock here, not at the next request.
            self.send({"type": "done"})

        for tensor in outputs:
            poison_(tensor)
        return TimedSet(
            inputs, outputs, refresh, lambda: None, finished, poisoned_by_refresh=self.device == CPU
        )


def main(argv: list[str] | None = None) -> None:
    serve(Child, argv)


if __name__ == "__main__":
    main()
