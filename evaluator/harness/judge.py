"""The judge: the trusted process that decides every verdict, and never runs submitted code.

It runs in the evaluator's own process (``evaluator.api.evaluate``). It spawns the untrusted
child (``child.py``), owns every buffer a kernel call reads or writes (``shared``), generates the
inputs itself, compares the outputs with the reference itself, times the baseline itself (before
the submission is even imported, so nothing of the submission's can slow it down), serves the
child's timing loop with fresh inputs and checks a random sample of its timed calls, and samples
NVML telemetry around the kernel's timing. What the child reports is a claim: its timing medians
are confirmed afterwards by a witness (``witness``), and its framing checks can only reject it.

The judge is not dumpable (``PR_SET_DUMPABLE`` 0), so a child of the same user cannot ptrace it or
read its memory through /proc.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from evaluator.harness import correctness as corr
from evaluator.harness import process_tree, witness_run, work
from evaluator.harness.device import device_info, single_threaded_host_work
from evaluator.harness.judge_timing import BaselineTimer, KernelTimingService
from evaluator.harness.outcome import JudgeOutcome
from evaluator.harness.parent import ChildDied, ChildProcess, ChildTimeout, ProtocolViolation
from evaluator.harness.request import EvaluationRequest
from evaluator.harness.shared import Arena
from evaluator.harness.witness import judge_wall_witness, set_aside_unconfirmed_timing
from evaluator.problems import Problem

if TYPE_CHECKING:
    from evaluator.harness.warm import WarmStart

PR_SET_DUMPABLE = 4
#: Statuses the child may report against itself (never PASSED).
SELF_REPORTED = ("REJECTED", "INCORRECT_DTYPE", "INCORRECT_SHAPE")


class HarnessFailure(RuntimeError):
    """The evaluator itself failed (not the submission): reported as an error of the runner."""


def not_dumpable() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def shape_dict(shape: Any, status: str, message: str) -> dict[str, Any]:
    return {"shape_id": shape.shape_id, "axes": dict(shape.axes), "ranked": shape.ranked, "status": status,
            "message": message, "checks": [], "wall_seconds": 0.0}


def spawn_child(scratch: Path, device: str, start_limit_s: float, log_cap: int) -> ChildProcess:
    """A fresh untrusted child, told to warm up its device (no job yet: it learns the job from
    the ``config`` the judge sends next, at once or, for a warm spare, once its job came)."""
    child = ChildProcess(["-m", "evaluator.harness.child"], scratch, log_cap)
    spawned = time.monotonic()
    child.spawn(start_limit_s)
    child.send({"type": "warm_up", "device": device, "spawned_monotonic": spawned})
    return child


def trial_seeds(request: EvaluationRequest, public_seeds: list[int], shape_id: str) -> list[tuple[int, int | None]]:
    """(seed, the public seed to show or None) per correctness trial: ranked runs with a secret
    seed fold it into every public one, and show none of them."""
    if request.mode == "ranked" and request.secret_seed is not None:
        return [(work.ranked_seed(request.secret_seed, seed, shape_id), None) for seed in public_seeds]
    return [(seed, seed) for seed in public_seeds]


def trial_label(public: int | None, distribution: str) -> str:
    return f"seed {public} / {distribution}" if public is not None else f"secret seed / {distribution}"


def check_entry(label: str, distribution: str, public: int | None, status: str, message: str,
                errors: dict[str, Any]) -> dict[str, Any]:
    return {"trial": label, "distribution": distribution, "seed": public, "passed": status == "PASSED",
            "status": status, "message": message, "errors": errors}


def passed_shape(shape: Any, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """A shape whose every trial passed; the trials' notes become its message."""
    notes = sorted({str(check["message"]) for check in checks if check["message"]})
    report = shape_dict(shape, "PASSED", "; ".join(notes))
    report["checks"] = checks
    return report


class Judge:
    def __init__(self, request: EvaluationRequest, problem: Problem, shape_ids: list[str],
                 config: dict[str, Any], scratch: Path, warm: WarmStart | None = None) -> None:
        self.request, self.problem, self.config, self.scratch = request, problem, config, scratch
        #: A warm spare's prepared child (and witness session), or None: start both now.
        self.warm = warm
        self.shapes = [problem.shape(shape_id) for shape_id in shape_ids]
        self.refmod = problem.reference_module()
        self.device = request.device
        self.arena = Arena(self.device, scratch)
        self.outcome = JudgeOutcome(device={})
        self.phase, self.phase_began = "start_up", time.monotonic()
        self.baselines: dict[str, Any] = {}
        self.nvml: Any = None
        #: The ncu witness session, started with the job so its start-up overlaps the timing.
        self.witness_session: Any = None
        #: Most processes NVML saw with a CUDA context on the GPU during a witnessed call (recorded).
        self.witness_gpu_processes: int | None = None
        #: The witness process's early load of the submission (``witness_run.begin_load``).
        self.witness_load: Any = None

    # ------------------------------------------------------------ phases

    def next_phase(self, phase: str) -> None:
        now = time.monotonic()
        self.outcome.phase_seconds[self.phase] = round(now - self.phase_began, 3)
        self.phase, self.phase_began = phase, now

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def context(self, shape: Any) -> work.ShapeContext:
        return work.ShapeContext(self.problem, self.refmod, dict(shape.axes), shape.shape_id, self.device,
                                 None, self.sync, None)

    # ------------------------------------------------------------ the job

    def run(self) -> JudgeOutcome:
        self.outcome.facts["judge_not_dumpable"] = not_dumpable()
        # Orphans of the job's processes come back to the judge, which clears them (process_tree).
        self.outcome.facts["judge_subreaper"] = process_tree.become_subreaper()
        limits = self.request.limits
        if self.warm is None:
            self.child = spawn_child(self.scratch, self.device, limits.compile_s, limits.log_bytes)
        else:
            self.child = self.warm.hand_over_child(limits.compile_s, limits.log_bytes)
            self.outcome.facts["warm_spare"] = self.warm.facts()
        self.child.send(self.config)
        self._launch_witness()
        try:
            self._converse()
        except ChildTimeout:
            self._timed_out()
        except ProtocolViolation as error:
            self._set_status("REJECTED", f"forged report: {error} (class 16: the child spoke out of turn)")
        except ChildDied:
            self._died()
        finally:
            self.next_phase("done")
            self.outcome.phase_seconds.pop("done", None)
            self.outcome.log = self.child.close()
            self.arena.close()
        return self.outcome

    def _launch_witness(self) -> None:
        ready = self.warm.hand_over_witness() if self.warm is not None else None
        wanted = self.request.mode == "ranked" and self.device == "cuda"
        if ready is not None and wanted and ready.fits(self.request.profile, self.request.profile_sections):
            self.witness_session = ready
            return
        if ready is not None:  # a test job, or one that asks ncu for other metrics
            ready.discard()
        if not wanted:
            return
        from evaluator.harness.witness import NcuSession

        session = NcuSession(self.scratch, self.request.profile, self.request.profile_sections)
        if session.ncu is not None:
            session.launch()
            self.witness_session = session

    def close_witness(self) -> None:
        if self.witness_session is not None:
            self.witness_session.finish(0)
            self.witness_session = None

    def _converse(self) -> None:
        self._prepare_device()
        if self.warm is None:
            self.child.receive("warmed")
        warm = self.child.receive("warm")
        self.outcome.child_claims["start_up_seconds"] = warm.get("start_up_seconds")
        self.next_phase("baseline")
        self._time_baselines()
        self.next_phase("compile")
        self.child.send({"type": "import"})
        if not self._imported():
            return
        self.next_phase("test")
        witness_run.begin_load(self)
        self.child.enter("test", self.request.limits.test_s)
        passed = self._test_stage()
        if self.outcome.status is None and passed:
            if self.witness_load is not None:
                self.next_phase("witness.load_wait")  # the load the test stage did not hide
                witness_run.await_load(self)
            self.next_phase("ranked")
            self.child.enter("ranked", self.request.limits.ranked_s)
            self._ranked_stage(passed)
        self.child.send({"type": "finish"})

    def _prepare_device(self) -> None:
        single_threaded_host_work()
        if self.device == "cuda":
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            from evaluator.harness.telemetry import Nvml

            uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
            self.nvml = Nvml(f"GPU-{uuid}" if uuid else None)
        self.outcome.device = device_info(self.device)
        self.baseline_timer = BaselineTimer(self)

    def _time_baselines(self) -> None:
        """Every shape's baseline, before the submission exists: nothing of its can slow them."""
        for shape in self.shapes:
            self.baselines[shape.shape_id] = self.baseline_timer.time(shape)

    def _imported(self) -> bool:
        message = self.child.receive("imported", "compile_error")
        if message["type"] == "compile_error":
            self._set_status("COMPILE_ERROR", str(message.get("message", ""))[:20000])
            return False
        self.outcome.evidence = self._evidence()
        if message.get("problem"):
            self._set_status("REJECTED", str(message["problem"]))
            return False
        return True

    def _evidence(self) -> dict[str, Any] | None:
        """Static PTX/CUDA evidence built here from the source (a child's word would rank it)."""
        if self.request.language == "python" or self.device != "cuda":
            return None
        from evaluator.harness.evidence import static_evidence

        return static_evidence(self.request, self.problem)

    def _set_status(self, status: str, message: str) -> None:
        if self.outcome.status is None:
            self.outcome.status, self.outcome.message = status, message

    # ------------------------------------------------------------ correctness

    def _test_stage(self) -> list[Any]:
        passed = []
        for index, shape in enumerate(self.shapes):
            self.child.enter("test", self.request.limits.test_s, shape.shape_id)
            started = time.perf_counter()
            report = self._shape_correctness(shape)
            report["wall_seconds"] = time.perf_counter() - started
            self.outcome.shapes.append(report)
            if report["status"] == "REJECTED":
                self._set_status("REJECTED", f"{shape.shape_id}: {report['message']}")
                return []
            if report["status"] == "PASSED":
                passed.append((shape, report))
            if report.pop("fatal", False):
                for rest in self.shapes[index + 1:]:
                    self.outcome.shapes.append(
                        shape_dict(rest, "RUNTIME_ERROR", "not run: an earlier CUDA fault poisoned the context"))
                break
        return passed

    def _shape_correctness(self, shape: Any) -> dict[str, Any]:
        ctx = self.context(shape)
        group = f"test:{shape.shape_id}"
        first = self.refmod.generate_inputs(dict(shape.axes), 0, self.device, self.problem.distributions[0])
        inputs, outputs, handles = self.shared_set(ctx, first, group)
        del first
        try:
            self.child.send({"type": "bind", "shape": shape.shape_id, **handles})
            bound = self.child.receive("bound")
            if bound.get("error"):
                return shape_dict(shape, "COMPILE_ERROR", str(bound["error"]))
            return self._trials(shape, ctx, inputs, outputs)
        finally:
            self.unbind(group)

    def shared_set(self, ctx: work.ShapeContext, like: dict[str, torch.Tensor], group: str) -> tuple[
            list[torch.Tensor], list[torch.Tensor], dict[str, Any]]:
        inputs, outputs, in_handles, out_handles = [], [], [], []
        for spec in self.problem.inputs:
            tensor, handle = self.arena.tensor(spec.name, tuple(like[spec.name].shape), like[spec.name].dtype, group)
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

    def _trials(self, shape: Any, ctx: work.ShapeContext, inputs: list[torch.Tensor],
                outputs: list[torch.Tensor]) -> dict[str, Any]:
        checks = []
        for seed, public in trial_seeds(self.request, self.config["public_seeds"], shape.shape_id):
            for distribution in self.problem.distributions:
                label = trial_label(public, distribution)
                status, message, errors, fatal = self.call_and_check(ctx, inputs, outputs, seed, distribution)
                checks.append(check_entry(label, distribution, public, status, message, errors))
                if status != "PASSED":
                    report = shape_dict(shape, status, f"{label}: {message}")
                    report.update(checks=checks, fatal=fatal)
                    return report
        return passed_shape(shape, checks)

    def write_inputs(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
                     seed: int, distribution: str) -> dict[str, torch.Tensor]:
        """Fresh inputs into the shared buffers (the judge keeps its own copy), outputs poisoned."""
        private = self.refmod.generate_inputs(dict(ctx.axes), seed, self.device, distribution)
        for spec, shared in zip(self.problem.inputs, inputs):
            shared.copy_(private[spec.name])
        for tensor in outputs:
            corr.poison_(tensor)
        self.sync()
        return private

    def call_and_check(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
                       seed: int, distribution: str) -> tuple[str, str, dict[str, Any], bool]:
        """One call on fresh inputs, judged here: (status, message, errors, CUDA context lost)."""
        private = self.write_inputs(ctx, inputs, outputs, seed, distribution)
        self.child.send({"type": "call"})
        answer = self.child.receive("called")
        if answer.get("error"):
            return "RUNTIME_ERROR", str(answer["error"])[:4000], {}, bool(answer.get("fatal"))
        if answer.get("problem"):  # the child incriminating itself: only failing statuses are taken
            status = str(answer.get("problem_status"))
            return (status if status in SELF_REPORTED else "REJECTED"), str(answer["problem"]), {}, False
        status, message, errors = self.verify(ctx, inputs, outputs, private)
        note = str(answer.get("note") or "")
        if note and status == "PASSED":
            message = note
        return status, message, errors, False

    def take_outputs(self, outputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """The outputs copied out of the shared memory now, by name."""
        self.sync()
        taken = {spec.name: tensor.clone() for spec, tensor in zip(self.problem.outputs, outputs)}
        self.sync()
        return taken

    def verify(self, ctx: work.ShapeContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
               private: dict[str, torch.Tensor],
               taken: dict[str, torch.Tensor] | None = None) -> tuple[str, str, dict[str, Any]]:
        """Inputs untouched, then the outputs (copied out of the shared memory first, or ``taken``
        earlier) against the reference of the judge's own copy of the inputs."""
        self.sync()
        for spec, shared in zip(self.problem.inputs, inputs):
            if not torch.equal(shared, private[spec.name]):
                return "REJECTED", f"the kernel modified its input {spec.name} (class 7)", {}
        got = taken if taken is not None else self.take_outputs(outputs)
        errors = work.compare_outputs(ctx, private, got)
        corr.poison_and_release(got)
        if corr.outputs_pass(errors, self.problem, ctx.axes):
            return "PASSED", "", errors
        return "INCORRECT_NUMERICAL", work.describe_failure(errors), errors

    # ------------------------------------------------------------ timing

    def _ranked_stage(self, passed: list[Any]) -> None:
        for shape, report in passed:
            self.child.enter("ranked", self.request.limits.ranked_s, shape.shape_id)
            started = time.perf_counter()
            KernelTimingService(self, shape, report).run()
            if self._clock_disagrees(report):
                # The CPU witness is one sample of the judge's clock per checked call, and a busy
                # machine delays the child's wake-up in every one of them (nothing the child reports
                # about its run queue can be taken off: docs/security.md). One fresh timing: a
                # forged claim disagrees again, an honest one measured in a busy moment need not.
                retimed = set_aside_unconfirmed_timing(report)
                self.child.enter("ranked", self.request.limits.ranked_s, shape.shape_id)
                KernelTimingService(self, shape, report).run()
                if retimed not in report.get("notes", []):  # a recorded timing rewrote the notes
                    report["notes"] = [*report.get("notes", []), retimed]
            report["wall_seconds"] += time.perf_counter() - started
            if report["status"] == "REJECTED":
                self._set_status("REJECTED", f"{shape.shape_id}: {report['message']}")
                return
            if report.pop("fatal", False):
                return

    def _clock_disagrees(self, report: dict[str, Any]) -> bool:
        """CPU device: a passed timing its witness (the judge's clock) would not confirm."""
        if self.device != "cpu" or report.get("status") != "PASSED" or not report.get("timing"):
            return False
        witness = judge_wall_witness(report)
        return witness is not None and not witness["confirmed"]

    # ------------------------------------------------------------ endings

    def _timed_out(self) -> None:
        stage = self.child.timed_out
        assert stage is not None
        where = f" (shape {stage.shape})" if stage.shape else ""
        message = f"stage {stage.name}{where} ran past its limit of {stage.limit_s:g} s; the process group was killed"
        self._set_status("TIMEOUT", message)
        done = {report["shape_id"] for report in self.outcome.shapes}
        for report in self.outcome.shapes:
            if report["status"] == "PASSED" and stage.name == "ranked" and "timing" not in report:
                report.update(status="TIMEOUT", message=f"not finished: {message}")
        for shape in self.shapes:
            if shape.shape_id not in done:
                self.outcome.shapes.append(shape_dict(shape, "TIMEOUT", f"not finished: {message}"))

    def _died(self) -> None:
        how = self.child.exit_description()
        stage = self.child.stage
        if self.phase in ("start_up", "baseline"):
            if self.warm is not None:  # nothing of the job ran: the spare says it was not ready
                self.warm.child_lost = True
            raise HarnessFailure(f"the evaluator's child failed while starting ({how})\n"
                                 f"{self.child.close()[-4000:]}")
        where = f", shape {stage.shape}" if stage.shape else ""
        self._set_status("RUNTIME_ERROR", f"the process died ({how}) during stage {stage.name}{where}")
