"""The judge of a multi-GPU job: one trusted process for all ranks (docs/multigpu.md).

It never runs submitted code. It spawns one untrusted child per rank (``rank_child``), which form
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
from evaluator.harness import work
from evaluator.harness.device import device_info, single_threaded_host_work
from evaluator.harness.multi.rank_env import rank_environment
from evaluator.harness.multi.rank_group import (
    RankDied,
    RankFailure,
    RankGroup,
    RankProtocolViolation,
    RankRaised,
    RankTimeout,
)
from evaluator.harness.outcome import JudgeOutcome, ShapeResult, timed_calls_check
from evaluator.harness.request import EvaluationRequest
from evaluator.harness.single.timing_service import CHECK_ONE_IN, MIN_CHECKS, judge_clock
from evaluator.harness.stages import HarnessFailure, StageScript, TrialVerdict, self_reported
from evaluator.harness.timing.loop import stats_dict
from evaluator.harness.timing.stats import converged, summarize
from evaluator.harness.witness.witnesses import judge_wall_witness
from evaluator.problems import Problem, Shape
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
    last_late: bool = False  # the last iteration's launches outlasted a rank's gate (rank_timers)
    late_dropped: int = 0


class MultiJudge(StageScript):
    """The stage script against every rank of a multi-GPU job at once."""

    def __init__(self, request: EvaluationRequest, problem: Problem, shape_ids: list[str],
                 config: dict[str, Any], scratch: Path, world_size: int) -> None:
        super().__init__(request, problem, shape_ids, config, scratch)
        self.world_size = world_size
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

    # ------------------------------------------------------------ the job

    def _launch(self) -> None:
        self.outcome.facts["world_size"] = self.world_size

    def _ended_by(self, failure: Exception) -> bool:
        if isinstance(failure, RankTimeout):
            self._timed_out(failure)
        elif isinstance(failure, RankProtocolViolation):
            self.outcome.judged(Status.REJECTED,
                                f"forged report: {failure.message} (class 16: a rank spoke out of turn)")
        elif isinstance(failure, RankDied):
            self._died(failure)
        elif isinstance(failure, RankRaised):
            if self.phase in (Stage.START_UP, Stage.BASELINE):  # nothing of the submission's exists yet
                raise HarnessFailure(f"the baseline failed: {failure.message}") from None
            self._ended_by_rank(Status.RUNTIME_ERROR, failure.message)
        else:
            return False
        return True

    def _close_processes(self) -> str:
        return self.ranks.close()

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

    def _start_up(self) -> None:
        self._check_devices()
        self.ranks.spawn(self.request.limits.compile_s, self._configs())
        self._prepare_device()
        warm = self.ranks.gather("warm")
        self.outcome.device = dict(warm[0].get("device") or device_info(self.device))

    def _enter(self, stage: str, limit_s: float, shape_id: str | None = None) -> None:
        self.ranks.enter(stage, limit_s, shape_id)

    def _import_submission(self) -> bool:
        self.ranks.enter(Stage.COMPILE, self.request.limits.compile_s)
        self.ranks.send_all({"type": "import"})
        return self._imported()

    def _finish(self) -> None:
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

    def _shape_correctness(self, shape: Shape) -> ShapeResult:
        group = f"test:{shape.shape_id}"
        buffers = self.shared_set(shape, group)
        try:
            for rank, rank_buffers in enumerate(buffers):
                self.ranks.send(rank, {"type": "bind", "shape": shape.shape_id, **rank_buffers.handles})
            self.ranks.gather("bound")
            axes = self.axes(shape)
            return self._trials(shape, lambda seed, distribution: self.call_and_check(
                axes, buffers, seed, distribution))
        finally:
            self.unbind(group)

    def call_and_check(self, axes: dict[str, int], buffers: list[RankBuffers], seed: int,
                       distribution: str) -> TrialVerdict:
        """One call on every rank, judged here. A rank that raises ends the job (RankRaised from
        ``gather``: its peers may be blocked in a collective with it)."""
        global_inputs = self.write_inputs(axes, buffers, seed, distribution)
        self.ranks.send_all({"type": "call"})
        answers = self.ranks.gather("called")
        for rank, answer in enumerate(answers):
            if answer.get("problem"):  # a rank incriminating itself: only failing statuses are taken
                status = self_reported(answer.get("problem_status"))
                return TrialVerdict(status, f"rank {rank}: {answer['problem']}", {})
        status, message, errors = self.verify(axes, buffers, global_inputs)
        notes = sorted({str(answer.get("note")) for answer in answers if answer.get("note")})
        if notes and status == Status.PASSED:
            message = "; ".join(notes)
        return TrialVerdict(status, message, errors)

    # ------------------------------------------------------------ timing

    def _time_baseline(self, shape: Shape) -> None:
        self.ranks.enter(Stage.BASELINE, self.request.limits.ranked_s, shape.shape_id)
        iterations = self._iterate(shape, "baseline", float(self.config["budgets"]["baseline"]))
        if iterations.failure is not None:
            raise HarnessFailure(f"the baseline failed on {shape.shape_id}: {iterations.failure[1]}")
        self.baselines[shape.shape_id] = self._stats(iterations)

    def _time_kernel(self, shape: Shape, result: ShapeResult) -> None:
        """The kernel's iterations on ``shape``; a failed check ends the shape ``REJECTED``."""
        iterations = self._iterate(shape, "kernel", float(self.config["budgets"]["kernel"]))
        if iterations.failure is None:
            self._record(result, shape, iterations)
        else:
            result.ends(*iterations.failure)

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
        stats = stats_dict(summary, method, method, converged(summary, TARGET_REL, MIN_SAMPLES))
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
        # run-queue time is theirs to inflate, so none of it is taken off (timing_service._loop).
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
        self._ended_by_rank(
            Status.TIMEOUT,
            f"stage {stage.name}{where} ran past its limit of {stage.limit_s:g} s ({failure.message}); "
            "every rank's process group was killed",
        )

    def _died(self, failure: RankDied) -> None:
        if self.phase in (Stage.START_UP, Stage.BASELINE):
            self.stopped = True
            raise HarnessFailure(f"a rank of the evaluator failed while starting: {failure.message}\n"
                                 f"{self.ranks.close()[-4000:]}")
        stage = self.ranks.stage
        where = f", shape {stage.shape}" if stage.shape else ""
        self._ended_by_rank(
            Status.RUNTIME_ERROR,
            f"{failure.message} during stage {stage.name}{where}; every rank's process group was killed",
        )

    def _ended_by_rank(self, status: Status, message: str) -> None:
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
