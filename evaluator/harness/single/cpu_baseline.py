"""The CPU development device's baseline: timed in the child, the way the kernel is, before the
submission is imported.

On a GPU the judge times the baseline itself (``timing_service.BaselineTimer``): cold L2, device
timestamps, nothing of the host's in the figure. On the CPU the time is the host's wall clock, and
where the call runs changes it: the kernel runs in the child on buffers the judge wrote from another
process (shared files, cache lines owned by another core), the baseline ran in the judge on memory
it had just written itself. The baseline submitted as a kernel (``examples/python/vector_add.py`` is
``torch.add(a, b, out=c)``, the baseline byte for byte) scored 0.31-0.43 instead of 0.5.

So on the CPU the baseline is timed by the child, through the judge's timing service, on the judge's shared
sets: the same code path, the same buffers, the same clocks. The child has run nothing of the submission yet
(as in a warm spare, everything in it is ours), so its figures are trusted. It is timed once per shape, which
gives its figures and what the judge's clock holds beyond the call itself (the pipe, both processes' wake-ups,
the harness's loop: ``overhead_us``, the lowest round trip less the median call, so that what the clock leaves
is not less than the call). The ranked rule then treats the baseline's clock exactly as the kernel's
(``scoring.ranked_cpu_us``): a time the judge measured itself, which no claim of the child's can lower
(docs/security.md, "The CPU board ranks the judge's clock").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluator.harness.outcome import JudgeClock, ShapeResult
from evaluator.harness.single.timing_service import KernelTimingService, judge_clock
from evaluator.harness.timing.loop import TimingOutcome
from evaluator.vocabulary import Status


class BaselineTimingFailed(RuntimeError):
    """The trusted baseline could not be timed in the child: the evaluator's failure."""


@dataclass(frozen=True)
class BaselineClock:
    """What the judge's clock established about the baseline in the child (per shape)."""

    #: The judge's clock beyond the call (the lowest round trip of the baseline's checked calls less
    #: its median): taken off the kernel's and the baseline's clock alike.
    overhead_us: float
    #: The 10th percentile of the judge's clock over the baseline's checked calls.
    round_trip_low_us: float


class ChildBaselineService(KernelTimingService):
    """One timing of the problem's baseline in the child, served like the kernel's."""

    def _serve(self) -> None:
        judge = self.judge
        judge.child.send({
            "type": "time", "baseline": True, "shape": self.shape.shape_id,
            "sets": [handles for _, _, handles in self.sets],
            "budget_s": float(judge.config["budgets"]["baseline"]), "allowance_us": 0.0, "gate_us": None,
        })
        self.answer = self._loop()

    def outcome(self) -> tuple[TimingOutcome, JudgeClock]:
        """The baseline's timing and the judge's clock of it; BaselineTimingFailed when either is missing."""
        stats = self.answer.get("stats")
        if self.failure is not None or not isinstance(stats, dict) or self.answer.get("problem") \
                or self.answer.get("error") or not self.checked_round_trips_us:
            why = self.failure or self.answer.get("error") or self.answer.get("problem") or "no timing"
            raise BaselineTimingFailed(f"the baseline could not be timed in the child: {why}")
        return TimingOutcome(
            stats, list(self.answer.get("flags") or []), list(self.answer.get("notes") or [])
        ), judge_clock(self.checked_round_trips_us, self.calls, self.checks)


def time_in_child(judge: Any, shape: Any) -> tuple[TimingOutcome, BaselineClock]:
    """The baseline of ``shape`` timed in the child, and what the judge's clock said of it."""
    # The service fills a shape result with what it finds; the baseline's is read from the service.
    service = ChildBaselineService(judge, shape, ShapeResult.of(shape, Status.PASSED, ""))
    service.run()
    timing, clock = service.outcome()
    overhead = max(min(clock.round_trips_us) - float(timing.stats["median_us"]), 0.0)
    return timing, BaselineClock(
        overhead_us=overhead, round_trip_low_us=float(clock.round_trip_low_us or 0.0)
    )
