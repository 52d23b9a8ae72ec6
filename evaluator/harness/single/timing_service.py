"""The judge's part of timing: the baseline, timed here, and the service behind the child's loop.

- ``BaselineTimer``: the problem's baseline (trusted library code) timed in the judge with the same
  method as the kernel (cold L2, launch gate, CUPTI device spans, events cross-check), on private
  input sets, before the submission is imported: the GPU is the judge's alone then, so the
  baseline a score divides by is one the submission could not slow down.
- ``KernelTimingService``: while the child times the kernel, every call's preparation is a request
  to the judge (``next``): the judge writes fresh inputs into that shared set (a fresh seed per
  call, so no cache keyed by pointer, shape or content ever hits), poisons its outputs and answers
  ``go``. When a call is over (on the GPU the child says ``done`` the moment it has finished on the
  device; on the CPU its next request comes the moment it returns) the judge decides, with its own
  randomness and after the call was made, whether to check it: the outputs are read from the
  shared memory and compared with the reference of the inputs it wrote. A wrong one ends the
  timing: REJECTED (classes 5 and 9). It also measures, on its own clock, how long each call kept
  it waiting (from ``go`` to that word, less the judge's own wake-up delay): a bound on the call's
  true cost that the child cannot shorten (``witness``), taken over the checked calls only. A
  ``done`` sent early only shortens the wait of a call whose outputs are then read unfinished.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from typing import Any

from evaluator.harness import correctness as corr
from evaluator.harness import work
from evaluator.harness.outcome import JudgeClock, ShapeResult, timed_calls_check
from evaluator.harness.timing.loop import TimingConfig, TimingOutcome, time_cpu
from evaluator.vocabulary import CPU, CUDA, Status

#: A timed call is checked with probability 1/CHECK_ONE_IN...
CHECK_ONE_IN = 24
#: ...and at least this many per shape (the last call is checked when fewer were).
MIN_CHECKS = 3
#: Until MIN_CHECKS calls were checked, 1 in CHECK_EARLY_ONE_IN is: the checked calls are the
#: judge's clock's sample (the bound on hidden host work), and at 1 in 24 a shape of a few dozen
#: calls often had none but the last: on the H200, 27 of 172 ranked shapes once had no clocked check
#: (docs/security.md, host work).
CHECK_EARLY_ONE_IN = 4
#: A checked call that failed is read once more after this long: outputs that changed meanwhile
#: were written by work the call left running (class 2), which the report then says.
LEFT_RUNNING_GRACE_S = 0.02
#: An SM clock after the timing below this fraction of the clock before it is no power cap: noted.
CLOCK_DROP = 0.7


class NoActivity:
    """The judge runs no submitted code: its own threads need no watching."""

    def problems(self, native: bool = True, children: bool = True) -> str | None:
        return None


class BaselineTimer:
    def __init__(self, judge: Any) -> None:
        self.judge = judge
        self.cold: Any = None
        if judge.device == CUDA:
            import torch

            from evaluator.harness.timing.l2 import ColdL2

            self.cold = ColdL2(torch.device("cuda"))

    def time(self, shape: Any) -> TimingOutcome:
        judge = self.judge
        ctx = judge.context(shape)
        sets = work.build_sets(ctx, work.set_count(ctx, judge.config["set_cap_bytes"]))
        config = TimingConfig(
            budget_s=float(judge.config["budgets"]["baseline"]),
            launch_allowance_us=math.inf,
            checks_per_batch=0,
        )
        baseline = work.with_scalar_args(judge.refmod.baseline, judge.problem, shape.axes)
        try:
            if judge.device == CUDA:
                from evaluator.harness.timing.gpu_loop import time_gpu

                return time_gpu(baseline, sets, config, self.cold, NoActivity())
            return time_cpu(baseline, sets, config, NoActivity())
        finally:
            work.release_sets(sets)


class KernelTimingService:
    """Serves one shape's timing loop in the child; fills ``result`` with what was established."""

    def __init__(self, judge: Any, shape: Any, result: ShapeResult) -> None:
        self.judge, self.shape, self.result = judge, shape, result
        self.ctx = judge.context(shape)
        self.group = f"time:{shape.shape_id}"
        self.distribution = judge.problem.distributions[0]
        self.seeds: dict[int, int] = {}
        self.calls = 0
        self.checks = 0
        self.last_round_trip_us: float | None = None
        #: The round trips of the calls the judge checked: chosen by the judge after each call, so a
        #: call that skipped its work is in this sample only by failing its check.
        self.checked_round_trips_us: list[float] = []
        self.failure: str | None = None
        #: (calls served, set) of the last check: the last call is not checked twice.
        self.checked_index: tuple[int, int] | None = None
        #: CPU: the child asks for the next set the moment a call returns (timing.time_cpu).
        self.prefetching = judge.device == CPU
        #: CPU: the last answered call: its set, its outputs at the answer, whether it was checked.
        self.answered: tuple[int, dict[str, Any], bool] | None = None

    def run(self) -> None:
        judge = self.judge
        like = judge.refmod.generate_inputs(dict(self.shape.axes), 0, judge.device, self.distribution)
        count = work.set_count(self.ctx, judge.config["set_cap_bytes"])
        self.sets = [judge.shared_set(self.ctx, like, self.group) for _ in range(count)]
        del like
        try:
            self._serve()
        finally:
            judge.unbind(self.group)

    def _serve(self) -> None:
        judge, baseline = self.judge, self.judge.baselines[self.shape.shape_id]
        self.result.telemetry_before = judge.nvml.sample() if judge.nvml else None
        judge.child.send({
            "type": "time", "shape": self.shape.shape_id,
            "sets": [handles for _, _, handles in self.sets],
            "budget_s": float(judge.config["budgets"]["kernel"]),
            "allowance_us": baseline.launch_excess_us, "gate_us": baseline.stats.get("gate_us"),
        })
        answer = self._loop()
        self.result.telemetry_after = judge.nvml.sample() if judge.nvml else None
        if self.failure is not None:
            self.result.ends(Status.REJECTED, self.failure)
            return
        self._record(answer, baseline)

    def _loop(self) -> dict[str, Any]:
        """Serve the child's requests for input sets until it answers ``timed``. The judge's clock of
        a call runs from its ``go`` to the child's word that it is over: on the GPU ``done``, sent
        the moment the call has finished on the device (``gpu_loop``); on the CPU the next
        request, which the child makes the moment a call returns (``timing.time_cpu``). What the
        child does after that (the profiler's batch ends, its statistics before ``timed``) is no
        part of any call's clock."""
        last: int | None = None  # the set the child was last given
        sent = 0.0
        answered = True  # the call on ``last`` has ended the judge's clock (no call yet: nothing to end)
        child = self.judge.child
        expected = ("next", "timed") if self.prefetching else ("next", "timed", "done")
        while True:
            message = child.receive(*expected)
            child.end_call()
            if message["type"] == "done":
                self._finished(last, sent, answered)
                answered = True
                continue
            if message["type"] == "timed":
                if self.prefetching:
                    self._last_call_checked(message)
                else:
                    # A last call not yet ``done``: the answer came after the child's statistics,
                    # so its wait is no measure of the call; its outputs are still judged.
                    if not answered:
                        self._call_answered(last, sent, message, clocked=False)
                    # Checked now when too few were; the clock it ended with ``done`` stands (the
                    # child can only lengthen it), none when it never said ``done``.
                    if last is not None and self.checks < MIN_CHECKS and self.failure is None \
                            and self.checked_index != (self.calls, last):
                        self._check(last)
                return message
            if not answered:
                self._call_answered(last, sent, message)
            if self.failure is not None:
                child.send({"type": "stop"})
                return {}
            last = self._refresh(message.get("set"))
            answered = False
            self.judge.limit_call(self.shape.shape_id, f"timed call {self.calls}", first=self.calls == 1)
            sent = (
                time.monotonic()
            )  # before the send: the child may run its call before this thread runs again
            child.send({"type": "go"})

    def _finished(self, index: int | None, sent: float, answered: bool) -> None:
        """GPU: the child says the call on ``index`` is over; once per call, after a ``go``."""
        from evaluator.harness.parent import ProtocolViolation

        if index is None or answered:
            raise ProtocolViolation("'done' without a call in progress")
        self._call_answered(index, sent, {"type": "done"})

    def _call_answered(
        self, index: int | None, sent: float, message: dict[str, Any], clocked: bool = True
    ) -> None:
        """The call on ``index`` has answered: the judge's clock of it, and 1 in CHECK_ONE_IN checked
        (1 in CHECK_EARLY_ONE_IN until MIN_CHECKS were)."""
        if index is None:
            return
        # The judge's wait less its own wake-up delay after the child answered. Nothing of
        # the child's run-queue time is taken off: the child controls it (a main thread that
        # lowers its priority and spins while other threads work sits in the run queue for
        # most of a call; tests/fixtures/cheats/c16_starve_judge_clock.py).
        waited_us = (time.monotonic() - sent) * 1e6 - self.judge.child.reader.wake_queue_ns / 1e3
        self.last_round_trip_us = max(waited_us, 0.0) if clocked else None
        checked = secrets.randbelow(CHECK_EARLY_ONE_IN if self.checks < MIN_CHECKS else CHECK_ONE_IN) == 0
        if self.prefetching and message["type"] == "next":
            # The outputs as they were at the answer, kept until the next answer: the last call is
            # known only when ``timed`` comes, and is checked (when too few were) against these.
            taken = self.judge.take_outputs(self.sets[index][1])
            self.answered = (index, taken, checked)
            if checked:
                self._check(index, taken)
        elif checked:
            self._check(index)

    def _last_call_checked(self, message: dict[str, Any]) -> None:
        """CPU: at ``timed``, the last call is checked when fewer than MIN_CHECKS were, against its
        outputs as they were at its answer (work it left running cannot finish meanwhile)."""
        if (
            self.answered is None
            or self.failure is not None
            or message.get("error")
            or self.checks >= MIN_CHECKS
        ):
            return
        index, taken, checked = self.answered
        if not checked:
            self._check(index, taken)

    def _refresh(self, index: Any) -> int:
        from evaluator.harness.parent import ProtocolViolation

        if not isinstance(index, int) or not 0 <= index < len(self.sets):
            raise ProtocolViolation(f"asked for input set {index!r}")
        inputs, outputs, _ = self.sets[index]
        self.seeds[index] = work.fresh_seed()
        self.judge.write_inputs(self.ctx, inputs, outputs, self.seeds[index], self.distribution)
        self.calls += 1
        return index

    def _check(self, index: int, taken: dict[str, Any] | None = None) -> None:
        """A call that has answered, judged. Its outputs are copied out at once (or were, ``taken``,
        at its answer), before the judge spends any time of its own (the private inputs, the reference): work
        a call leaves running after its answer (a thread, a fork on torch's inter-op pool) must not get that
        time to finish in, or it would be timed and witnessed at its launch alone (c02_finish_after_reply).
        The outputs are read again after the comparison: any change is such work, caught in the act."""
        judge = self.judge
        inputs, outputs, _ = self.sets[index]
        taken = judge.take_outputs(outputs) if taken is None else taken
        digests = {name: corr.digest(tensor) for name, tensor in taken.items()}
        private = judge.refmod.generate_inputs(dict(self.shape.axes), self.seeds[index], judge.device,
                                               self.distribution)
        status, message, _ = judge.verify(self.ctx, inputs, outputs, private, taken)
        changed = self._changed_outputs(outputs, digests)
        if status != Status.PASSED and not changed:
            time.sleep(
                LEFT_RUNNING_GRACE_S
            )  # already failed: give work still running the time to show itself
            changed = self._changed_outputs(outputs, digests)
        self.checks += 1
        self.checked_index = (self.calls, index)
        if self.last_round_trip_us is not None:
            self.checked_round_trips_us.append(self.last_round_trip_us)
        if self.failure is not None:
            return
        if changed:
            self.failure = (
                f"timed call {self.calls} changed its outputs {changed} after it had returned: work "
                f"left running past the call is not timed (class 2)"
            )
        elif status != Status.PASSED:
            self.failure = (
                f"timed call {self.calls} wrote a wrong output (caching, replay or less work when "
                f"timed; classes 5 and 9): {message}"
            )

    def _changed_outputs(self, outputs: list[Any], digests: dict[str, tuple[int, int, int]]) -> list[str]:
        self.judge.sync()
        return [spec.name for spec, tensor in zip(self.judge.problem.outputs, outputs, strict=True)
                if corr.digest(tensor) != digests[spec.name]]

    def _record(self, answer: dict[str, Any], baseline: TimingOutcome) -> None:
        result = self.result
        if answer.get("error"):
            result.ends(Status.RUNTIME_ERROR, str(answer["error"])[:4000])
            result.fatal = bool(answer.get("fatal"))
            return
        if answer.get("problem"):
            result.ends(Status.REJECTED, str(answer["problem"]))
            return
        if not isinstance(answer.get("stats"), dict):  # a rewritten answer: neither stats nor why not
            result.ends(
                Status.REJECTED,
                "forged report: the child's timing answer holds no timing and no reason (class 16)",
            )
            return
        result.timing, result.baseline_timing = answer.get("stats"), baseline.stats
        result.flags = list(answer.get("flags") or [])
        result.notes = list(answer.get("notes") or []) + [
            f"baseline: {note}" for note in baseline.flags + baseline.notes]
        result.notes += telemetry_notes(result.telemetry_before, result.telemetry_after)
        result.clock = judge_clock(self.checked_round_trips_us, self.calls, self.checks)
        result.checks.append(
            timed_calls_check(
                f"{self.checks} timed calls checked by the judge", self.distribution, f"of {self.calls} calls"
            )
        )


def judge_clock(checked_us: list[float], calls: int, checks: int) -> JudgeClock:
    """What the judge's clock establishes over one shape. The witness statistics come from the
    checked calls only: a submission that skips the work on some calls (stale outputs) cannot pull
    them down without failing a check."""
    return JudgeClock(
        round_trip_us=statistics.median(checked_us) if checked_us else None,
        round_trip_low_us=low_percentile(checked_us),
        round_trips_us=[round(value, 1) for value in checked_us],
        calls=calls, checked_calls=checks,
    )


def low_percentile(values: list[float], fraction: float = 0.1) -> float | None:
    """The 10th percentile: the profiler's overhead on half the calls lifts the median, never this;
    work a call always does (host work, copies) lifts this too."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


def telemetry_notes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    notes = []
    if any((sample or {}).get("throttled") for sample in (before, after)):
        notes.append("GPU throttled during measurement")
    clock_before, clock_after = (before or {}).get("sm_clock_mhz"), (after or {}).get("sm_clock_mhz")
    if clock_before and clock_after and clock_after < CLOCK_DROP * clock_before:
        notes.append(f"SM clock fell from {clock_before} to {clock_after} MHz during the measurement")
    return notes

