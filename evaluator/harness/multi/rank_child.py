"""One rank of a multi-GPU job: the only place the submission's code runs. Untrusted from its import.

``python -m evaluator.harness.multi.rank_child --in-fd R --out-fd W``. The judge (``multi_judge``)
spawns one per rank and drives them all in lockstep over their own channels. Before the import
this process runs the harness's code only, so what it measures then (the baseline) is the judge's
to trust; from the import on, every word is a claim (docs/multigpu.md). It

- joins the job's process group (``rank.join_group``) and warms up torch, the device, the group and
  the baseline BEFORE the submission exists, then snapshots what its framing checks compare with;
- times the baseline on the judge's buffers when told to (before the import);
- imports the submission on command, calls ``kernel(ctx, *inputs, *outputs)`` on the judge's
  buffers on command, and times the iterations the judge starts (``rank_timers``);
- reports what its framing checks saw: patched callables, threads, child processes, swapped
  outputs, and the multicast-off environment (``rank_env``): a REJECTED it reports stands.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from evaluator.harness import anticheat, channel, work
from evaluator.harness.child_side import ChildSide, numel, path_of, serve
from evaluator.harness.device import device_info
from evaluator.harness.multi.rank_context import join_group
from evaluator.harness.multi.rank_env import MULTICAST_OFF, EnvironmentGuard
from evaluator.harness.multi.rank_timers import IterationFailed, iteration_timer
from evaluator.harness.submission import SubmissionError, load
from evaluator.problems import get_problem
from evaluator.vocabulary import CPU, CUDA


class RankChild(ChildSide):
    def __init__(self, rfd: int, wfd: int) -> None:
        super().__init__(rfd, wfd)
        self.config = channel.read_frame(rfd)
        self.problem = get_problem(self.config["problem"])
        self.refmod = self.problem.reference_module()
        self.device = str(self.config["device"])
        self.rank, self.world_size = int(self.config["rank"]), int(self.config["world_size"])
        #: Each shape's baseline gate: the kernel's is never shorter (rank_timers.iteration_timer).
        self.baseline_gates: dict[str, float] = {}

    def axes(self, shape_id: str) -> dict[str, int]:
        return self.problem.axes_at(self.problem.shape(shape_id).axes, self.world_size)

    def sync(self) -> None:
        if self.device == CUDA:
            torch.cuda.synchronize(self.ctx.device)

    # ------------------------------------------------------------ before the submission

    def start(self) -> None:
        """Group, device, warm-up: everything that starts threads or loads libraries, before the import."""
        self.environment = EnvironmentGuard(dict(MULTICAST_OFF))
        if self.device != CUDA:
            torch.set_num_threads(1)  # steadier wall-clock timing on a shared development machine
        self.ctx = join_group(self.device, str(self.config["store"]), self.rank, self.world_size)
        if self.device == CUDA:
            from evaluator.harness.timing.l2 import ColdL2

            self.cold = ColdL2(self.ctx.device)
            import cuda.bindings.runtime  # noqa: F401 - CUDA IPC, to map the judge's buffers
        self._baseline_once()
        self.activity = anticheat.Activity.now()
        modules = anticheat.harness_modules() + [sys.modules["__main__"]]
        self.integrity = anticheat.standard_integrity(modules)
        with warnings.catch_warnings():  # reading torch.distributed's deprecated aliases warns
            warnings.simplefilter("ignore")
            self.integrity.watch_namespace("torch.distributed", torch.distributed)

    def _baseline_once(self) -> None:
        """One collective call of the baseline on every rank: the group's own threads and
        connections (gloo pairs, NCCL communicators, library threads) exist from now on."""
        shapes = [self.problem.shape(shape_id) for shape_id in self.config["shapes"]]
        smallest = min(shapes, key=lambda shape: numel(shape.axes))
        axes = self.problem.axes_at(smallest.axes, self.world_size)
        global_inputs = self.refmod.generate_inputs(axes, 0, self.ctx.device, self.problem.distributions[0])
        mine = self.refmod.rank_inputs(global_inputs, axes, self.rank)
        outputs = work.corr.allocate_outputs(self.problem.outputs, axes, str(self.ctx.device))
        self.refmod.baseline(self.ctx, *[mine[spec.name] for spec in self.problem.inputs], *outputs.values())
        self.sync()

    # ------------------------------------------------------------ the conversation

    def run(self) -> None:
        self.start()
        self.send({"type": "warm", "rank": self.rank, "device": device_info(self.device) if self.device == CPU
                   else _gpu_facts(self.ctx.device)})
        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "import": self.import_submission, "bind": self.bind, "call": self.call, "unbind": self.unbind,
            "time": self.time,
        }
        while True:
            command = self.receive()
            kind = str(command.get("type"))
            if kind == "finish":
                return
            if kind not in handlers:
                raise channel.ChannelError(f"unexpected command {kind!r}")
            handlers[kind](command)

    def import_submission(self, command: dict[str, Any]) -> None:
        if self.submission is not None:
            raise channel.ChannelError("import twice")
        try:
            self.submission = load("python", path_of(self.config["file"]), None, self.problem, self.device)
        except SubmissionError as error:
            self.send({"type": "compile_error", "message": error.message})
            return
        self.send({"type": "imported", "problem": self.framing_problem("import")})

    def framing_problem(self, stage: str, children: bool = True) -> str | None:
        changed = self.integrity.changed()
        if changed:
            return f"patched {', '.join(changed[:8])} during {stage} (class 4)"
        busy = self.activity.problems(native=False, children=children)
        if busy:
            return f"{busy} (after {stage})"
        return self.environment.problem(stage)

    def implementation(self, which: str, shape_id: str) -> Callable[..., Any]:
        """The baseline (harness code, only before the import) or the submission's kernel, with
        this rank's context bound as the first argument."""
        if which == "baseline":
            if self.submission is not None:
                raise channel.ChannelError("the baseline is timed before the import only")
            return functools.partial(self.refmod.baseline, self.ctx)
        if self.submission is None:
            raise channel.ChannelError("the kernel before the import")
        kernel = work.kernel_for_shape(self.submission, self.problem, "python", self.axes(shape_id))
        return functools.partial(kernel, self.ctx)

    # ------------------------------------------------------------ correctness calls

    def bind(self, command: dict[str, Any]) -> None:
        self.bound = None
        inputs, outputs = self.mapped.open_all(command["inputs"]), self.mapped.open_all(command["outputs"])
        self.kernel = self.implementation("kernel", str(command["shape"]))
        self.bound = (inputs, outputs)
        self.send({"type": "bound"})

    def call_problem(self) -> str | None:
        return self.activity.problems(native=False) or self.environment.problem("a call")

    # ------------------------------------------------------------ timing

    def time(self, command: dict[str, Any]) -> None:
        """Iterations the judge starts (``run``) until it says ``stop``; each answer is a claim."""
        fn = self.implementation(str(command["impl"]), str(command["shape"]))
        sets = [self.mapped.open_all(item["inputs"]) + self.mapped.open_all(item["outputs"])
                for item in command["sets"]]
        impl, shape_id = str(command["impl"]), str(command["shape"])
        timer = iteration_timer(
            self.ctx, self.cold, self.baseline_gates.get(shape_id) if impl == "kernel" else None
        )
        self.send({"type": "ready", "method": timer.method})
        while True:
            command = self.receive()
            if command.get("type") == "stop":
                break
            if command.get("type") != "run":
                raise channel.ChannelError(f"unexpected command {command.get('type')!r} while timing")
            try:
                elapsed_us = timer.run(fn, sets[int(command["set"])], bool(command.get("warmup")))
            except IterationFailed as error:
                self.send({"type": "ran", "error": f"during timing: {error}"})
                return self._after_failed_timing()
            self.send(
                {
                    "type": "ran",
                    "us": elapsed_us,
                    "late": bool(timer.late),
                    "problem": self._after_iteration(),
                }
            )
        sets.clear()
        if impl == "baseline":
            self.baseline_gates[shape_id] = float(timer.diagnostics().get("gate_us", 0.0))
        self.send(
            {
                "type": "timed",
                "problem": self.framing_problem(f"the timing of {command.get('shape', '')}"),
                "diagnostics": timer.diagnostics(),
            }
        )

    def _after_iteration(self) -> str | None:
        """The framing checks after every timed iteration: threads, the environment and (GPU) the
        persisting L2, which the next iteration's preparation would otherwise reset unseen (class 11)."""
        problem = self.activity.problems(native=False, children=False) or self.environment.problem(
            "a timed call"
        )
        if problem is None and self.cold is not None:
            problem = self.cold.persisting_in_use()
        return problem

    def _after_failed_timing(self) -> None:
        """The judge ends the job after a failed iteration; wait for it to say so."""
        while self.receive().get("type") not in ("stop", "finish"):
            pass


def _gpu_facts(device: torch.device) -> dict[str, Any]:
    with torch.cuda.device(device):
        return device_info("cuda")


def main(argv: list[str] | None = None) -> None:
    serve(RankChild, argv)


if __name__ == "__main__":
    main()
