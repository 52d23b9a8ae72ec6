"""The judge of a multi-GPU job: one trusted process for all ranks (docs/multigpu.md).

It never runs submitted code. It spawns one untrusted child per rank (``multi_child``), which form
the job's process group among themselves; it owns every rank's input and output buffers (on GPU r
for rank r, CUDA IPC; shared files on the CPU), generates the GLOBAL data of every call from its own
seeds, writes each rank's share, and after the call checks every rank: inputs unchanged, outputs
against the reference computed from the global data. It drives every timed iteration on every rank
at once and takes the iteration's time as the maximum over the ranks' claims; its own clock around
each iteration is the witness on the CPU device. The baseline is timed by the same ranks before
the submission is imported (they run the harness's code only until then).

Any rank that raises, dies, speaks out of turn or misses the stage deadline ends the job: the other
ranks may be blocked in a collective with it, so every rank's process group is killed and the
shapes not yet judged say why.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evaluator.harness import correctness as corr
from evaluator.harness import process_tree, work
from evaluator.harness.device import device_info, single_threaded_host_work
from evaluator.harness.judge import HarnessFailure, not_dumpable, self_reported, trial_label, trial_seeds
from evaluator.harness.judge_timing import CHECK_ONE_IN, MIN_CHECKS, judge_clock
from evaluator.harness.multi_env import rank_environment
from evaluator.harness.outcome import JudgeOutcome, ShapeResult, timed_calls_check, trial_check
from evaluator.harness.ranks import (
    RankDied,
    RankFailure,
    RankGroup,
    RankProtocolViolation,
    RankRaised,
    RankTimeout,
)
from evaluator.harness.request import EvaluationRequest
from evaluator.harness.shared import Arena
from evaluator.harness.stats import converged, summarize
from evaluator.harness.timing import _stats_dict
from evaluator.harness.witness import judge_wall_witness, set_aside_unconfirmed_timing
from evaluator.problems import Problem, Shape
from evaluator.report import CorrectnessCheck
from evaluator.vocabulary import CPU, CUDA, RANKED, Stage, Status

#: Warm-up iterations before the timed ones: at least this many and this long (as one GPU's).
WARMUP_ITERATIONS = 3
WARMUP_S = 0.025
#: Timed iterations: at least MIN_SAMPLES; then until the median's 95% CI is within TARGET_REL of it,
#: the budget is spent, or MAX_ITERATIONS were timed.
MIN_SAMPLES = 10
TARGET_REL = 0.005
MAX_ITERATIONS = 2000


class StopJob(Exception):
    """A rank failed in a way that leaves the group unusable; the shape's report says how."""


@dataclass
class RankBuffers:
    """One rank's shared tensors for one shape (judge-side views) and the handles its child maps."""

    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    handles: dict[str, Any]


@dataclass
class Iterations:
    """What the judge established over one shape's timed iterations."""

    samples_us: list[float] = field(default_factory=list)  # per iteration: the slowest rank's claim
    per_rank_us: list[list[float]] = field(default_factory=list)
    judge_wait_us: list[float] = field(default_factory=list)
    checked_wait_us: list[float] = field(default_factory=list)  # of the iterations the judge checked
    warmup: int = 0
    checks: int = 0
    failure: tuple[Status, str] | None = None  # (status, message)
    rank_diagnostics: list[dict[str, Any]] = field(default_factory=list)  # the ranks' own: gate, host launch
    last_late: bool = False  # the last iteration's launches outlasted a rank's gate (multi_timing)
    late_dropped: int = 0


class MultiJudge:
    def __init__(self, request: EvaluationRequest, problem: Problem, shape_ids: list[str],
                 config: dict[str, Any], scratch: Path, world_size: int) -> None:
        self.request, self.problem, self.config, self.scratch = request, problem, config, scratch
        self.world_size = world_size
        self.shapes = [problem.shape(shape_id) for shape_id in shape_ids]
        self.refmod = problem.reference_module()
        self.device = request.device
        self.arena = Arena(self.device, scratch)
        self.outcome = JudgeOutcome(device={})
        self.phase: str = Stage.START_UP
        self.phase_began = time.monotonic()
        self.baselines: dict[str, dict[str, Any]] = {}
        self.ranks = RankGroup(world_size, scratch, request.limits.log_bytes, rank_environment())
        #: Set once a rank failed: no rank is asked anything more (they are killed in ``run``).
        self.stopped = False

    # ------------------------------------------------------------ devices

    def judge_device(self) -> torch.device:
        """Where the judge draws the global data and computes references: GPU 0, or the CPU."""
        return torch.device(CUDA, 0) if self.device == CUDA else torch.device(CPU)

    def rank_index(self, rank: int) -> int | None:
        return rank if self.device == CUDA else None

    def sync(self) -> None:
        if self.device == CUDA:
            for index in range(self.world_size):
                torch.cuda.synchronize(index)

    def axes(self, shape: Shape) -> dict[str, int]:
        return self.problem.axes_at(shape.axes, self.world_size)

    def next_phase(self, phase: str) -> None:
        now = time.monotonic()
        self.outcome.phase_seconds[self.phase] = round(now - self.phase_began, 3)
        self.phase, self.phase_began = phase, now

    # ------------------------------------------------------------ the job

    def run(self) -> JudgeOutcome:
        self.outcome.facts["judge_not_dumpable"] = not_dumpable()
        self.outcome.facts["judge_subreaper"] = process_tree.become_subreaper()
        self.outcome.facts["world_size"] = self.world_size
        try:
            self._check_devices()
            self.ranks.spawn(self.request.limits.compile_s, self._configs())
            self._converse()
        except RankTimeout as failure:
            self._timed_out(failure)
        except RankProtocolViolation as failure:
            self.outcome.judged(Status.REJECTED,
                                f"forged report: {failure.message} (class 16: a rank spoke out of turn)")
        except RankDied as failure:
            self._died(failure)
        except RankRaised as failure:
            if self.phase in (Stage.START_UP, Stage.BASELINE):  # nothing of the submission's exists yet
                raise HarnessFailure(f"the baseline failed: {failure.message}") from None
            self._ended_by(Status.RUNTIME_ERROR, failure.message)
        finally:
            self.next_phase("done")
            self.outcome.phase_seconds.pop("done", None)
            self.outcome.log = self.ranks.close()
            self.arena.close()
        return self.outcome

    def _configs(self) -> list[dict[str, Any]]:
        store = self.scratch / f"group-{secrets.token_hex(8)}"
        return [
            {
                "type": "config",
                "problem": self.problem.name,
                "file": str(Path(self.request.file).resolve()),
                "device": self.device,
                "mode": self.request.mode,
                "shapes": [shape.shape_id for shape in self.shapes],
                "world_size": self.world_size,
                "rank": rank,
                "store": str(store),
            }
            for rank in range(self.world_size)
        ]

    def _converse(self) -> None:
        self._prepare_device()
        warm = self.ranks.gather("warm")
        self.outcome.device = dict(warm[0].get("device") or device_info(self.device))
        self.next_phase(Stage.BASELINE)
        for shape in self.shapes:  # before the import: the ranks run the harness's code only
            self.ranks.enter(Stage.BASELINE, self.request.limits.ranked_s, shape.shape_id)
            self.baselines[shape.shape_id] = self._time_baseline(shape)
        self.next_phase(Stage.COMPILE)
        self.ranks.enter(Stage.COMPILE, self.request.limits.compile_s)
        self.ranks.send_all({"type": "import"})
        if not self._imported():
            return
        self.next_phase(Stage.TEST)
        self.ranks.enter(Stage.TEST, self.request.limits.test_s)
        passed = self._test_stage()
        if self.outcome.status is None and passed:
            self.next_phase(Stage.RANKED)
            self._ranked_stage(passed)
        if not self.ended:
            self.ranks.send_all({"type": "finish"})

    def _check_devices(self) -> None:
        """One GPU per rank, before any rank starts (a slot's CUDA_VISIBLE_DEVICES lists its GPUs)."""
        if self.device == CUDA and torch.cuda.device_count() < self.world_size:
            raise HarnessFailure(f"{self.world_size} ranks need {self.world_size} GPUs; this job sees "
                                 f"{torch.cuda.device_count()} (CUDA_VISIBLE_DEVICES)")

    def _prepare_device(self) -> None:
        single_threaded_host_work()
        if self.device == CUDA:
            torch.cuda.init()
            for index in range(self.world_size):
                torch.zeros(1, device=torch.device(CUDA, index))

    def _imported(self) -> bool:
        answers = self.ranks.gather("imported", "compile_error")
        for rank, answer in enumerate(answers):
            if answer["type"] == "compile_error":
                self.outcome.judged(Status.COMPILE_ERROR, str(answer.get("message", ""))[:20000])
                return False
            if answer.get("problem"):
                self.outcome.judged(Status.REJECTED, f"rank {rank}: {answer['problem']}")
                return False
        return True

    # ------------------------------------------------------------ buffers and inputs

    def shared_set(self, shape: Shape, group: str) -> list[RankBuffers]:
        """Every rank's input and output buffers for one shape, outputs poisoned."""
        axes = self.axes(shape)
        buffers = []
        for rank in range(self.world_size):
            tensors: dict[str, list[Any]] = {"inputs": [], "outputs": [], "in": [], "out": []}
            for role, specs in (("in", self.problem.inputs), ("out", self.problem.outputs)):
                for spec in specs:
                    tensor, handle = self.arena.tensor(
                        spec.name,
                        spec.concrete_shape(axes),
                        corr.torch_dtype(spec.dtype),
                        group,
                        self.rank_index(rank),
                    )
                    if role == "out":
                        corr.poison_(tensor)
                    tensors["inputs" if role == "in" else "outputs"].append(tensor)
                    tensors[role].append(handle.to_json())
            buffers.append(RankBuffers(tensors["inputs"], tensors["outputs"],
                                       {"inputs": tensors["in"], "outputs": tensors["out"]}))
        return buffers

    def write_inputs(self, axes: dict[str, int], buffers: list[RankBuffers], seed: int,
                     distribution: str) -> dict[str, torch.Tensor]:
        """Fresh global data; each rank's share into its buffers, its outputs poisoned. The judge
        keeps the global data (its own copy) for the checks."""
        global_inputs = self.refmod.generate_inputs(axes, seed, self.judge_device(), distribution)
        for rank, rank_buffers in enumerate(buffers):
            mine = self.refmod.rank_inputs(global_inputs, axes, rank)
            for spec, shared in zip(self.problem.inputs, rank_buffers.inputs, strict=True):
                shared.copy_(mine[spec.name])
            for tensor in rank_buffers.outputs:
                corr.poison_(tensor)
        self.sync()
        return global_inputs

    def verify(self, axes: dict[str, int], buffers: list[RankBuffers],
               global_inputs: dict[str, torch.Tensor]) -> tuple[Status, str, dict[str, Any]]:
        """Every rank's inputs untouched, then every rank's outputs (copied out of the shared memory)
        against its part of the reference computed now from the judge's global data."""
        self.sync()
        for rank, rank_buffers in enumerate(buffers):
            mine = self.refmod.rank_inputs(global_inputs, axes, rank)
            for spec, shared in zip(self.problem.inputs, rank_buffers.inputs, strict=True):
                if not torch.equal(shared, mine[spec.name].to(shared.device)):
                    return (
                        Status.REJECTED,
                        f"rank {rank}: the kernel modified its input {spec.name} (class 7)",
                        {},
                    )
        references = dict(self.refmod.reference(global_inputs, axes))
        try:
            errors: dict[str, Any] = {}
            for rank, rank_buffers in enumerate(buffers):
                rank_errors = self._compare_rank(axes, rank, rank_buffers, references)
                errors.update({f"{name} (rank {rank})": stats for name, stats in rank_errors.items()})
                if not corr.outputs_pass(rank_errors, self.problem):
                    return (
                        Status.INCORRECT_NUMERICAL,
                        f"rank {rank}: {work.describe_failure(rank_errors)}",
                        errors,
                    )
            return Status.PASSED, "", errors
        finally:
            corr.poison_and_release(references)

    def _compare_rank(self, axes: dict[str, int], rank: int, buffers: RankBuffers,
                      references: dict[str, torch.Tensor]) -> dict[str, Any]:
        expected = self.refmod.rank_outputs(references, axes, rank)
        got = {spec.name: tensor.to(self.judge_device(), copy=True)
               for spec, tensor in zip(self.problem.outputs, buffers.outputs, strict=True)}
        self.sync()
        try:
            return {name: corr.compare(name, got[name], expected[name], self.problem.tolerance_for(name))
                    for name in got}
        finally:
            corr.poison_and_release(got)

    @property
    def ended(self) -> bool:
        """A rank failed (or a stage timed out): nothing more is asked of any rank."""
        return self.stopped or self.ranks.failure is not None

    def unbind(self, group: str) -> None:
        """Every rank unmaps first; then the memory is freed (a failed job's at the very end)."""
        if self.ended:
            return
        self.ranks.send_all({"type": "unbind"})
        self.ranks.gather("unbound")
        self.arena.free(group)

    # ------------------------------------------------------------ correctness

    def _test_stage(self) -> list[tuple[Shape, ShapeResult]]:
        passed = []
        for shape in self.shapes:
            self.ranks.enter(Stage.TEST, self.request.limits.test_s, shape.shape_id)
            started = time.perf_counter()
            result = self._shape_correctness(shape)
            result.wall_seconds = time.perf_counter() - started
            self.outcome.shapes.append(result)
            if result.status == Status.REJECTED:
                self.outcome.judged(Status.REJECTED, f"{shape.shape_id}: {result.message}")
                return []
            if result.status == Status.PASSED:
                passed.append((shape, result))
        return passed

    def _shape_correctness(self, shape: Shape) -> ShapeResult:
        group = f"test:{shape.shape_id}"
        buffers = self.shared_set(shape, group)
        try:
            for rank, rank_buffers in enumerate(buffers):
                self.ranks.send(rank, {"type": "bind", "shape": shape.shape_id, **rank_buffers.handles})
            self.ranks.gather("bound")
            return self._trials(shape, buffers)
        finally:
            self.unbind(group)

    def _trials(self, shape: Shape, buffers: list[RankBuffers]) -> ShapeResult:
        axes = self.axes(shape)
        checks: list[CorrectnessCheck] = []
        for seed, public in trial_seeds(self.request, self.config["public_seeds"], shape.shape_id):
            for distribution in self.problem.distributions:
                label = trial_label(public, distribution)
                status, message, errors = self.call_and_check(axes, buffers, seed, distribution)
                checks.append(trial_check(label, distribution, public, status, message, errors))
                if status != Status.PASSED:
                    return ShapeResult.failed(shape, status, f"{label}: {message}", checks)
        return ShapeResult.passed(shape, checks)

    def call_and_check(self, axes: dict[str, int], buffers: list[RankBuffers], seed: int,
                       distribution: str) -> tuple[Status, str, dict[str, Any]]:
        """One call on every rank, judged here. A rank that raises ends the job (RankRaised from
        ``gather``: its peers may be blocked in a collective with it)."""
        global_inputs = self.write_inputs(axes, buffers, seed, distribution)
        self.ranks.send_all({"type": "call"})
        answers = self.ranks.gather("called")
        for rank, answer in enumerate(answers):
            if answer.get("problem"):  # a rank incriminating itself: only failing statuses are taken
                return self_reported(answer.get("problem_status")), f"rank {rank}: {answer['problem']}", {}
        status, message, errors = self.verify(axes, buffers, global_inputs)
        notes = sorted({str(answer.get("note")) for answer in answers if answer.get("note")})
        if notes and status == Status.PASSED:
            message = "; ".join(notes)
        return status, message, errors

    # ------------------------------------------------------------ timing

    def _time_baseline(self, shape: Shape) -> dict[str, Any]:
        iterations = self._iterate(shape, "baseline", float(self.config["budgets"]["baseline"]))
        if iterations.failure is not None:
            raise HarnessFailure(f"the baseline failed on {shape.shape_id}: {iterations.failure[1]}")
        return self._stats(iterations)

    def _ranked_stage(self, passed: list[tuple[Shape, ShapeResult]]) -> None:
        for shape, result in passed:
            self.ranks.enter(Stage.RANKED, self.request.limits.ranked_s, shape.shape_id)
            started = time.perf_counter()
            iterations = self._iterate(shape, "kernel", float(self.config["budgets"]["kernel"]))
            if iterations.failure is None:
                self._record(result, shape, iterations)
                if self._clock_disagrees(result):
                    # As Judge._ranked_stage: on the CPU the witness is the judge's clock, which a busy
                    # machine lengthens (three processes on two cores in CI: 990 us reported, 5838 us
                    # waited). One fresh timing: a forged claim disagrees again, an honest one need not.
                    set_aside_unconfirmed_timing(result)
                    self.ranks.enter(Stage.RANKED, self.request.limits.ranked_s, shape.shape_id)
                    iterations = self._iterate(shape, "kernel", float(self.config["budgets"]["kernel"]))
                    if iterations.failure is None:
                        self._record(result, shape, iterations)
            result.wall_seconds += time.perf_counter() - started
            if iterations.failure is None:
                continue
            status, message = iterations.failure  # REJECTED: a check failed; the job ends here
            result.ends(status, message)
            self.outcome.judged(status, f"{shape.shape_id}: {message}")
            return

    def _clock_disagrees(self, result: ShapeResult) -> bool:
        """CPU device: a timing its witness (the judge's clock) would not confirm."""
        if self.device != CPU:
            return False
        witness = judge_wall_witness(result)
        return witness is not None and not witness.confirmed

    def _record(self, result: ShapeResult, shape: Shape, iterations: Iterations) -> None:
        result.timing = self._stats(iterations)
        result.baseline_timing = self.baselines[shape.shape_id]
        result.clock = judge_clock(iterations.checked_wait_us, len(iterations.samples_us), iterations.checks)
        result.checks.append(
            timed_calls_check(
                f"{iterations.checks} timed iterations checked by the judge (every rank)",
                self.problem.distributions[0],
                f"of {len(iterations.samples_us)} iterations",
            )
        )

    def _stats(self, iterations: Iterations) -> dict[str, Any]:
        summary = summarize(iterations.samples_us)
        method = "wall" if self.device == CPU else "events"
        stats = _stats_dict(summary, method, method, converged(summary, TARGET_REL, MIN_SAMPLES))
        stats.update(warmup_calls=iterations.warmup, cold_l2=self.device == CUDA,
                     rank_median_us=[statistics.median(values) for values in iterations.per_rank_us],
                     checked_iterations=iterations.checks, late_iterations_dropped=iterations.late_dropped,
                     rank_diagnostics=[d for d in iterations.rank_diagnostics if d] or None)
        return stats

    def _iterate(self, shape: Shape, impl: str, budget_s: float) -> Iterations:
        """Time ``impl`` on one shape: every iteration started on every rank at once by the judge."""
        axes, group = self.axes(shape), f"{impl}:{shape.shape_id}"
        per_rank = work.ShapeContext(
            self.problem, self.refmod, axes, shape.shape_id, self.device, None, self.sync
        )
        count = work.set_count(per_rank, int(self.config["set_cap_bytes"]))  # one rank's tensors per set
        sets = [self.shared_set(shape, group) for _ in range(count)]
        for rank in range(self.world_size):
            self.ranks.send(rank, {"type": "time", "impl": impl, "shape": shape.shape_id,
                                   "sets": [buffers[rank].handles for buffers in sets]})
        self.ranks.gather("ready")
        iterations = Iterations(per_rank_us=[[] for _ in range(self.world_size)])
        try:
            self._loop(axes, sets, impl, budget_s, iterations)
        finally:
            self._end_timing(group, iterations)
        return iterations

    def _loop(self, axes: dict[str, int], sets: list[list[RankBuffers]], impl: str, budget_s: float,
              iterations: Iterations) -> None:
        distribution = self.problem.distributions[0]
        warmup_began, timed_began = time.monotonic(), 0.0
        index = 0
        while True:
            warmup = (iterations.warmup < WARMUP_ITERATIONS or time.monotonic() - warmup_began < WARMUP_S) \
                and not iterations.samples_us
            buffers = sets[index % len(sets)]
            global_inputs = self.write_inputs(axes, buffers, work.fresh_seed(), distribution)
            claims = self._one_iteration(index % len(sets), warmup, iterations)
            if claims is None:
                return
            if warmup:
                iterations.warmup += 1
                timed_began = time.monotonic()
                index += 1
                continue
            # A late iteration (a rank still issuing the call when its gate ran out) timed host
            # latency: dropped, at most as many as were kept plus MIN_SAMPLES, so that a call whose
            # host time always outlasts the longest gate is measured with it, as it must be.
            if drop_late(iterations):
                iterations.late_dropped += 1
            else:
                iterations.samples_us.append(max(claims))
                for rank, claim in enumerate(claims):
                    iterations.per_rank_us[rank].append(claim)
            ready = self._done(iterations, time.monotonic() - timed_began, budget_s)
            # A random 1 in CHECK_ONE_IN of the kernel's iterations is checked after it ran, and
            # iterations go on, each checked, until at least MIN_CHECKS were.
            checking = impl == "kernel"
            if checking and (
                secrets.randbelow(CHECK_ONE_IN) == 0 or (ready and iterations.checks < MIN_CHECKS)
            ):
                self._check(axes, buffers, global_inputs, iterations)
                if iterations.failure is not None:
                    return
            if ready and (not checking or iterations.checks >= MIN_CHECKS):
                return
            index += 1

    def _one_iteration(self, set_index: int, warmup: bool, iterations: Iterations) -> list[float] | None:
        """Start one iteration on every rank; the claims, or None when it failed (``failure`` set)."""
        began = time.monotonic()
        self.ranks.send_all({"type": "run", "set": set_index, "warmup": warmup})
        answers = self.ranks.gather("ran")
        # The judge's wait less its own wake-up delay after the last rank answered; the ranks'
        # run-queue time is theirs to inflate, so none of it is taken off (judge_timing._loop).
        waited_us = (time.monotonic() - began) * 1e6 - self.ranks.wake_queue_ns / 1e3
        for rank, answer in enumerate(answers):
            if answer.get("problem"):
                iterations.failure = (Status.REJECTED, f"rank {rank}: {answer['problem']}")
                return None
        claims = [_claim(rank, answer) for rank, answer in enumerate(answers)]
        iterations.last_late = not warmup and any(answer.get("late") is True for answer in answers)
        if not warmup:
            iterations.judge_wait_us.append(max(waited_us, 0.0))
        return claims

    def _check(self, axes: dict[str, int], buffers: list[RankBuffers], global_inputs: dict[str, torch.Tensor],
               iterations: Iterations) -> None:
        status, message, _ = self.verify(axes, buffers, global_inputs)
        iterations.checks += 1
        if iterations.judge_wait_us:
            iterations.checked_wait_us.append(iterations.judge_wait_us[-1])
        if status != Status.PASSED:
            iterations.failure = (
                Status.REJECTED,
                (
                    f"timed iteration {len(iterations.samples_us)} wrote a wrong output "
                    f"(caching, replay or less work when timed; classes 5 and 9): {message}"
                ),
            )

    @staticmethod
    def _done(iterations: Iterations, elapsed_s: float, budget_s: float) -> bool:
        count = len(iterations.samples_us)
        if count < MIN_SAMPLES:
            return False
        if count >= MAX_ITERATIONS or elapsed_s > budget_s:
            return True
        return converged(summarize(iterations.samples_us), TARGET_REL, MIN_SAMPLES)

    def _end_timing(self, group: str, iterations: Iterations) -> None:
        """Every rank's framing checks after its timing (``timed``), then the sets are unmapped and freed."""
        if self.ended:
            return
        self.ranks.send_all({"type": "stop"})
        answers = self.ranks.gather("timed")
        iterations.rank_diagnostics = [dict(answer.get("diagnostics") or {}) for answer in answers]
        for rank, answer in enumerate(answers):
            if answer.get("problem") and iterations.failure is None:
                iterations.failure = (Status.REJECTED, f"rank {rank}: {answer['problem']}")
        self.unbind(group)  # the ranks unmap the sets before the judge frees them (CUDA IPC)

    # ------------------------------------------------------------ endings

    def _timed_out(self, failure: RankTimeout) -> None:
        stage = self.ranks.stage
        where = f" (shape {stage.shape})" if stage.shape else ""
        self._ended_by(Status.TIMEOUT, f"stage {stage.name}{where} ran past its limit of {stage.limit_s:g} s "
                                  f"({failure.message}); every rank's process group was killed")

    def _died(self, failure: RankDied) -> None:
        if self.phase in (Stage.START_UP, Stage.BASELINE):
            self.stopped = True
            raise HarnessFailure(f"a rank of the evaluator failed while starting: {failure.message}\n"
                                 f"{self.ranks.close()[-4000:]}")
        stage = self.ranks.stage
        where = f", shape {stage.shape}" if stage.shape else ""
        self._ended_by(
            Status.RUNTIME_ERROR,
            f"{failure.message} during stage {stage.name}{where}; every rank's process group was killed",
        )

    def _ended_by(self, status: Status, message: str) -> None:
        """A rank ended the job during the current stage: the shape being judged gets ``status`` and
        ``message``; the shapes after it were not run (or, passed, not timed)."""
        self.stopped = True
        self.outcome.judged(status, message)
        stage, reported = self.ranks.stage, {result.shape_id: result for result in self.outcome.shapes}
        for shape in self.shapes:
            result = reported.get(shape.shape_id)
            current = shape.shape_id == stage.shape
            if result is None:
                self.outcome.shapes.append(
                    ShapeResult.of(shape, status, message if current else f"not run: {message}")
                )
            elif stage.name == Stage.RANKED and result.status == Status.PASSED and result.timing is None:
                result.ends(status, message if current else f"not timed: {message}")


def drop_late(iterations: Iterations) -> bool:
    """Whether the last timed iteration is left out: late, and fewer dropped than MIN_SAMPLES plus
    the number kept (a call that is always late is measured, host time and all)."""
    return iterations.last_late and iterations.late_dropped < MIN_SAMPLES + len(iterations.samples_us)


def _claim(rank: int, answer: dict[str, Any]) -> float:
    """A rank's time for one iteration: a finite, non-negative number of microseconds."""
    value = answer.get("us")
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise RankProtocolViolation(rank, f"rank {rank} claimed an iteration time of {value!r}")
    return float(value)


def judge_multi(request: EvaluationRequest, problem: Problem, shape_ids: list[str], config: dict[str, Any],
                scratch: Path, world_size: int) -> JudgeOutcome:
    """The whole multi-GPU job, then (ranked mode) the witness of every timed shape: the judge's
    clock on the CPU device; on a GPU none yet (per-rank ncu is not done), so the result is
    provisional (docs/multigpu.md)."""
    outcome = MultiJudge(request, problem, shape_ids, config, scratch, world_size).run()
    if request.mode == RANKED and outcome.status is None:
        timed = [result for result in outcome.shapes if result.status == Status.PASSED and result.timing]
        for result in timed:  # on a GPU recorded for the tolerance of a future witness, not one itself
            assert result.timing is not None and result.clock is not None
            result.timing["judge_wait_us"] = [result.clock.round_trip_us, result.clock.round_trip_low_us]
        if request.device == CPU:
            for result in timed:
                result.witness = judge_wall_witness(result)
        elif timed:
            outcome.notes.append(
                "no timing witness for multi-GPU problems yet (Nsight Compute on every rank is "
                "not implemented): the result is provisional, never ranked"
            )
    return outcome


__all__ = ["MultiJudge", "RankFailure", "judge_multi"]
