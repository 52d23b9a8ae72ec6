"""The judge: the trusted process that decides every verdict, and never runs submitted code.

It runs in the evaluator's own process (``evaluator.api.evaluate``). It spawns the untrusted
child (``child``), owns every buffer a kernel call reads or writes (``shared``), generates the
inputs itself, compares the outputs with the reference itself, times the baseline itself (before
the submission is even imported, so nothing of the submission's can slow it down), serves the
child's timing loop with fresh inputs and checks a random sample of its timed calls, and samples
NVML telemetry around the kernel's timing. What the child reports is a claim: its timing medians
are confirmed afterwards by a witness (``witness``), and its framing checks can only reject it.

The judge is not dumpable (``PR_SET_DUMPABLE`` 0), so a child of the same user cannot ptrace it or
read its memory through /proc.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from evaluator.harness import correctness as corr
from evaluator.harness import work
from evaluator.harness.call_limits import call_limit
from evaluator.harness.device import device_info, single_threaded_host_work
from evaluator.harness.outcome import ShapeResult
from evaluator.harness.parent import ChildDied, ChildProcess, ChildTimeout, ProtocolViolation
from evaluator.harness.request import EvaluationRequest
from evaluator.harness.single.cpu_baseline import BaselineTimingFailed, time_in_child
from evaluator.harness.single.timing_service import BaselineTimer, KernelTimingService
from evaluator.harness.stages import HarnessFailure, StageScript, TrialVerdict, self_reported
from evaluator.harness.witness.session import await_load, begin_load
from evaluator.problems import Problem, Shape
from evaluator.vocabulary import CPU, CUDA, PYTHON, RANKED, Stage, Status

if TYPE_CHECKING:
    from evaluator.harness.single.warm import WarmStart


def spawn_child(scratch: Path, device: str, start_limit_s: float, log_cap: int) -> ChildProcess:
    """A fresh untrusted child, told to warm up its device (no job yet: it learns the job from
    the ``config`` the judge sends next, at once or, for a warm spare, once its job came)."""
    child = ChildProcess(["-m", "evaluator.harness.single.child"], scratch, log_cap)
    spawned = time.monotonic()
    child.spawn(start_limit_s)
    child.send({"type": "warm_up", "device": device, "spawned_monotonic": spawned})
    return child


class Judge(StageScript):
    """The stage script against one untrusted child."""

    def __init__(self, request: EvaluationRequest, problem: Problem, shape_ids: list[str],
                 config: dict[str, Any], scratch: Path, warm: WarmStart | None = None) -> None:
        super().__init__(request, problem, shape_ids, config, scratch)
        #: A warm spare's prepared child (and witness session), or None: start both now.
        self.warm = warm
        self.nvml: Any = None
        #: The ncu witness session, started with the job so its start-up overlaps the timing.
        self.witness_session: Any = None
        #: Most processes NVML saw with a CUDA context on the GPU during a witnessed call (recorded).
        self.witness_gpu_processes: int | None = None
        #: The witness process's early load of the submission (``witness.session.begin_load``).
        self.witness_load: Any = None

    # ------------------------------------------------------------ device

    def sync(self) -> None:
        if self.device == CUDA:
            torch.cuda.synchronize()

    def context(self, shape: Shape) -> work.ShapeContext:
        return work.ShapeContext(self.problem, self.refmod, dict(shape.axes), shape.shape_id, self.device,
                                 None, self.sync, None)

    # ------------------------------------------------------------ the job

    def _launch(self) -> None:
        limits = self.request.limits
        if self.warm is None:
            self.child = spawn_child(self.scratch, self.device, limits.compile_s, limits.log_bytes)
        else:
            self.child = self.warm.hand_over_child(limits.compile_s, limits.log_bytes)
            self.outcome.facts["warm_spare"] = self.warm.facts()
        self.child.send(self.config)
        self._launch_witness()

    def _ended_by(self, failure: Exception) -> bool:
        if isinstance(failure, ChildTimeout):
            self._timed_out()
        elif isinstance(failure, ProtocolViolation):
            self.outcome.judged(
                Status.REJECTED, f"forged report: {failure} (class 16: the child spoke out of turn)"
            )
        elif isinstance(failure, ChildDied):
            self._died()
        else:
            return False
        return True

    def _close_processes(self) -> str:
        return self.child.close()

    def _launch_witness(self) -> None:
        ready = self.warm.hand_over_witness() if self.warm is not None else None
        wanted = self.request.mode == RANKED and self.device == CUDA
        if ready is not None and wanted and ready.fits(self.request.profile, self.request.profile_sections):
            self.witness_session = ready
            return
        if ready is not None:  # a test job, or one that asks ncu for other metrics
            ready.discard()
        if not wanted:
            return
        from evaluator.harness.witness.witnesses import NcuSession

        session = NcuSession(self.scratch, self.request.profile, self.request.profile_sections)
        if session.ncu is not None:
            session.launch()
            self.witness_session = session

    def close_witness(self) -> None:
        if self.witness_session is not None:
            self.witness_session.finish(0)
            self.witness_session = None

    def _start_up(self) -> None:
        self._prepare_device()
        if self.warm is None:
            self.child.receive("warmed")
        warm = self.child.receive("warm")
        self.outcome.child_claims["start_up_seconds"] = warm.get("start_up_seconds")

    def _enter(self, stage: str, limit_s: float, shape_id: str | None = None) -> None:
        self.child.enter(stage, limit_s, shape_id)

    def _import_submission(self) -> bool:
        self.child.send({"type": "import"})
        return self._imported()

    def _test_stage_begins(self) -> None:
        begin_load(self)

    def _ranked_stage_begins(self) -> None:
        if self.witness_load is not None:
            self.next_phase("witness.load_wait")  # the load the test stage did not hide
            await_load(self)

    def _finish(self) -> None:
        self.child.send({"type": "finish"})

    def _prepare_device(self) -> None:
        single_threaded_host_work()
        if self.device == CUDA:
            torch.cuda.init()
            torch.zeros(1, device=CUDA)
            from evaluator.harness.timing.telemetry import Nvml

            uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
            self.nvml = Nvml(f"GPU-{uuid}" if uuid else None)
        self.outcome.device = device_info(self.device)
        self.baseline_timer = BaselineTimer(self)

    def _time_baseline(self, shape: Shape) -> None:
        """On the CPU in the child, the way the kernel is timed (``cpu_baseline``); on a GPU here."""
        if self.device == CPU:
            try:
                self.baselines[shape.shape_id], self.baseline_clocks[shape.shape_id] = \
                    time_in_child(self, shape)
            except BaselineTimingFailed as error:
                raise HarnessFailure(str(error)) from None
        else:
            self.baselines[shape.shape_id] = self.baseline_timer.time(shape)

    def _imported(self) -> bool:
        message = self.child.receive("imported", "compile_error")
        if message["type"] == "compile_error":
            self.outcome.judged(Status.COMPILE_ERROR, str(message.get("message", ""))[:20000])
            return False
        self.outcome.evidence = self._evidence()
        if message.get("problem"):
            self.outcome.judged(Status.REJECTED, str(message["problem"]))
            return False
        return True

    def _evidence(self) -> dict[str, Any] | None:
        """Static PTX/CUDA evidence built here from the source (a child's word would rank it)."""
        if self.request.language == PYTHON or self.device != CUDA:
            return None
        from evaluator.harness.evidence import static_evidence

        return static_evidence(self.request, self.problem)

    # ------------------------------------------------------------ correctness

    def _shape_correctness(self, shape: Shape) -> ShapeResult:
        ctx = self.context(shape)
        group = f"test:{shape.shape_id}"
        first = self.refmod.generate_inputs(dict(shape.axes), 0, self.device, self.problem.distributions[0])
        inputs, outputs, handles = self.shared_set(ctx, first, group)
        del first
        try:
            self.child.send({"type": "bind", "shape": shape.shape_id, **handles})
            bound = self.child.receive("bound")
            if bound.get("error"):
                return ShapeResult.of(shape, Status.COMPILE_ERROR, str(bound["error"]))
            return self._trials(shape, lambda seed, distribution: self.call_and_check(
                ctx, inputs, outputs, seed, distribution))
        finally:
            self.unbind(group)

    def shared_set(self, ctx: work.ShapeContext, like: dict[str, torch.Tensor], group: str) -> tuple[
            list[torch.Tensor], list[torch.Tensor], dict[str, Any]]:
        inputs, outputs, in_handles, out_handles = [], [], [], []
        for spec in self.problem.inputs:
            tensor, handle = self.arena.tensor(
                spec.name, tuple(like[spec.name].shape), like[spec.name].dtype, group
            )
            inputs.append(tensor)
            in_handles.append(handle.to_json())
        for spec in self.problem.outputs:
            dtype = corr.torch_dtype(spec.dtype)
            tensor, handle = self.arena.tensor(spec.name, spec.concrete_shape(ctx.axes), dtype, group)
            corr.poison_(tensor)
            outputs.append(tensor)
            out_handles.append(handle.to_json())
        return inputs, outputs, {"inputs": in_handles, "outputs": out_handles}

    def unbind(self, group: str) -> None:
        """The child unmaps first; then the memory is freed (an imported mapping would pin it)."""
        try:
            if not self.child.broken:
                self.child.send({"type": "unbind"})
                self.child.receive("unbound")
        finally:
            self.arena.free(group)

    def _limit_trial_call(self, shape_id: str, label: str, first: bool) -> None:
        self.limit_call(shape_id, f"the call of the test trial {label}", first)

    def write_inputs(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
                     seed: int, distribution: str) -> dict[str, torch.Tensor]:
        """Fresh inputs into the shared buffers (the judge keeps its own copy), outputs poisoned."""
        private = self.refmod.generate_inputs(dict(ctx.axes), seed, self.device, distribution)
        for spec, shared in zip(self.problem.inputs, inputs, strict=True):
            shared.copy_(private[spec.name])
        for tensor in outputs:
            corr.poison_(tensor)
        self.sync()
        return private

    def call_and_check(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
                       seed: int, distribution: str) -> TrialVerdict:
        """One call on fresh inputs, judged here."""
        private = self.write_inputs(ctx, inputs, outputs, seed, distribution)
        self.child.send({"type": "call"})
        answer = self.child.receive("called")
        self.child.end_call()
        if answer.get("error"):
            fatal = bool(answer.get("fatal"))
            return TrialVerdict(Status.RUNTIME_ERROR, str(answer["error"])[:4000], {}, fatal)
        if answer.get("problem"):  # the child incriminating itself: only failing statuses are taken
            return TrialVerdict(self_reported(answer.get("problem_status")), str(answer["problem"]), {})
        status, message, errors = self.verify(ctx, inputs, outputs, private)
        note = str(answer.get("note") or "")
        if note and status == Status.PASSED:
            message = note
        return TrialVerdict(status, message, errors)

    def limit_call(self, shape_id: str, what: str, first: bool) -> None:
        """The next call on ``shape_id`` answers within its limit (``call_limits``) or is killed."""
        baseline = self.baselines.get(shape_id)
        median = baseline.stats.get("median_us") if baseline is not None else None
        limit = call_limit(median, first, self.device, self.request.limits.first_call_s)
        self.child.limit_call(what, limit.seconds, limit.rule)

    def take_outputs(self, outputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """The outputs copied out of the shared memory now, by name."""
        self.sync()
        taken = {
            spec.name: tensor.clone() for spec, tensor in zip(self.problem.outputs, outputs, strict=True)
        }
        self.sync()
        return taken

    def verify(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
               private: dict[str, torch.Tensor],
               taken: dict[str, torch.Tensor] | None = None) -> tuple[Status, str, dict[str, Any]]:
        """Inputs untouched, then the outputs (copied out of the shared memory first, or ``taken``
        earlier) against the reference of the judge's own copy of the inputs."""
        self.sync()
        for spec, shared in zip(self.problem.inputs, inputs, strict=True):
            if not torch.equal(shared, private[spec.name]):
                return Status.REJECTED, f"the kernel modified its input {spec.name} (class 7)", {}
        got = taken if taken is not None else self.take_outputs(outputs)
        errors = work.compare_outputs(ctx, private, got)
        corr.poison_and_release(got)
        if corr.outputs_pass(errors, self.problem, ctx.axes):
            return Status.PASSED, "", errors
        return Status.INCORRECT_NUMERICAL, work.describe_failure(errors), errors

    # ------------------------------------------------------------ timing

    def _time_kernel(self, shape: Shape, result: ShapeResult) -> None:
        KernelTimingService(self, shape, result).run()

    # ------------------------------------------------------------ endings

    def _timed_out(self) -> None:
        stage = self.child.timed_out
        assert stage is not None
        where = f" (shape {stage.shape})" if stage.shape else ""
        if stage.call:
            message = (
                f"{stage.call}{where} ran past its limit of {stage.limit_s:.3g} s ({stage.call_rule}); "
                "the process group was killed"
            )
        else:
            message = (
                f"stage {stage.name}{where} ran past its limit of {stage.limit_s:g} s; "
                "the process group was killed"
            )
        self.outcome.judged(Status.TIMEOUT, message)
        done = {result.shape_id for result in self.outcome.shapes}
        for result in self.outcome.shapes:
            if result.status == Status.PASSED and stage.name == Stage.RANKED and result.timing is None:
                result.ends(Status.TIMEOUT, f"not finished: {message}")
        for shape in self.shapes:
            if shape.shape_id not in done:
                self.outcome.shapes.append(ShapeResult.of(shape, Status.TIMEOUT, f"not finished: {message}"))

    def _died(self) -> None:
        how = self.child.exit_description()
        stage = self.child.stage
        if self.phase in (Stage.START_UP, Stage.BASELINE):
            if self.warm is not None:  # nothing of the job ran: the spare says it was not ready
                self.warm.child_lost = True
            raise HarnessFailure(f"the evaluator's child failed while starting ({how})\n"
                                 f"{self.child.close()[-4000:]}")
        where = f", shape {stage.shape}" if stage.shape else ""
        self.outcome.judged(
            Status.RUNTIME_ERROR, f"the process died ({how}) during stage {stage.name}{where}"
        )
