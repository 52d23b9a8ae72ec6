"""Cold-cache timing of one implementation on one shape (docs/harness.md, "Timing").

Every timed call is preceded, outside the timed span, by: rotation to the next input set (distinct
``data_ptr``s), fresh input contents for that set (so no cache keyed by pointer, shape or content
ever hits), poisoned outputs, an L2 flush (2x the L2 size) and a persisting-L2 reset. On the GPU
the time of a call is its device span from CUPTI kernel timestamps (``trace``), cross-checked by
CUDA events around the call followed by a device-wide synchronise. On the CPU development device
it is the host wall clock. Repetitions continue in batches until the 95% CI of the median is
within ``target_rel`` of it or the budget is spent. Outputs of a random sample of timed calls
(chosen with os.urandom after the calls were made) are checked against the reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter, perf_counter_ns
from typing import Any

import torch

from evaluator.harness.correctness import poison_
from evaluator.harness.timing.stats import Summary, converged, summarize

_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_ms = torch.cuda.Event.elapsed_time
_synchronize = torch.cuda.synchronize
_urandom = os.urandom
#: Events are ranked instead of the device span when they exceed it by this much (relative)...
EVENT_EXCESS_REL = 0.10
#: ...and by at least this many microseconds: the host overhead of launching from Python (torch
#: dispatch, Triton's launcher: 5-40 us) is not work hidden from the timestamps.
EVENT_EXCESS_US = 50.0
#: Target length of one profiled batch, in seconds.
BATCH_SECONDS = 0.12


class TimingRejected(Exception):
    """An anti-cheat check failed while timing; the message names the class."""


class CallFailed(Exception):
    """The implementation raised during a timed or warm-up call."""


@dataclass
class TimedSet:
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    refresh: Callable[[], None]
    verify: Callable[[], str | None]
    #: Called the moment a GPU call has finished on the device, before any bookkeeping of this
    #: process's: with the judge serving the sets, it ends the judge's clock of the call
    #: (``timing_service``), so that clock holds the call and not the profiler's batch ends or the
    #: final statistics.
    finished: Callable[[], None] = lambda: None
    #: ``refresh`` poisons the outputs itself (the judge does, in its own process, before it answers):
    #: on the CPU poisoning them again here would only lengthen the judge's clock of every call.
    poisoned_by_refresh: bool = False


@dataclass
class TimingConfig:
    budget_s: float
    target_rel: float = 0.005
    min_samples: int = 10
    warmup_calls: int = 3
    warmup_s: float = 0.025
    checks_per_batch: int = 2
    max_batch: int = 256
    #: Host launch overhead that CUDA events may legitimately show beyond the device span (us):
    #: measured on the baseline in the same job (infinite for the baseline itself, whose host
    #: path is trusted). Events are ranked only beyond this allowance (class 14).
    launch_allowance_us: float = 0.0
    #: Shortest device-side gate before each timed GPU call (us): the baseline's, for the kernel.
    #: Each call's gate is sized from its own host launch time, never shorter than this.
    gate_us: float | None = None


@dataclass
class TimingOutcome:
    stats: dict[str, Any]
    flags: list[str] = field(default_factory=list)  # for review: the result is not ranked
    notes: list[str] = field(default_factory=list)  # informational: shown, ranking unaffected

    @property
    def launch_excess_us(self) -> float:
        """How far the CUDA-event median exceeds the device-span median (0 without both)."""
        events, span = self.stats.get("event_median_us"), self.stats.get("median_us")
        if events is None or span is None or self.stats.get("ranked_source") != "device_span":
            return 0.0
        return max(0.0, float(events) - float(span))


def stats_dict(summary: Summary, method: str, ranked_source: str, ok: bool) -> dict[str, Any]:
    return {
        "method": method,
        "median_us": summary.median,
        "mean_us": summary.mean,
        "min_us": summary.minimum,
        "max_us": summary.maximum,
        "std_us": summary.std,
        "n": summary.n,
        "ci95_low_us": summary.ci_low,
        "ci95_high_us": summary.ci_high,
        "ci95_half_width_rel": min(summary.half_width_rel, 1e9),
        "converged": ok,
        "ranked_source": ranked_source,
    }


def _call(fn: Callable[..., Any], timed: TimedSet) -> None:
    try:
        fn(*timed.inputs, *timed.outputs)
    except Exception as error:
        raise CallFailed(f"{type(error).__name__}: {error}") from error


def _prepare(timed: TimedSet, cold: Any) -> None:
    timed.refresh()
    if not timed.poisoned_by_refresh:
        for tensor in timed.outputs:
            poison_(tensor)
    if cold is not None:
        cold.prepare()


def _sample_checks(count: int, batch: int) -> set[int]:
    return {int.from_bytes(_urandom(4), "little") % batch for _ in range(count)}


# ---------------------------------------------------------------- CPU development device


def time_cpu(
    fn: Callable[..., Any], sets: list[TimedSet], config: TimingConfig, activity: Any
) -> TimingOutcome:
    """Wall-clock timing on the CPU. The next set is prepared the moment a call returns, before this
    process's own checks and statistics: with the judge serving the sets, preparing is the request
    that ends the judge's clock of the call (``timing_service``), so that clock holds the call and
    not this bookkeeping, and the last call ends it like every other (the ``timed`` answer follows a
    prepared set that is never called). Needs two sets at least: the one just called is still
    checked after the next one was prepared."""
    if len(sets) < 2:
        raise ValueError("time_cpu needs at least two input sets")
    started = perf_counter()
    calls = 0
    _prepare(sets[0], None)
    while calls < config.warmup_calls or perf_counter() - started < config.warmup_s:
        _call(fn, sets[calls % len(sets)])
        calls += 1
        _prepare(sets[calls % len(sets)], None)
    warmup = calls
    samples: list[float] = []
    started = perf_counter()
    while True:
        checks = _sample_checks(config.checks_per_batch, 16)
        for i in range(16):
            timed = sets[calls % len(sets)]
            t0 = perf_counter_ns()
            _call(fn, timed)
            samples.append((perf_counter_ns() - t0) / 1e3)
            calls += 1
            _prepare(sets[calls % len(sets)], None)
            _after_call(timed, activity, None, i in checks, len(samples), native=False)
        _after_batch(activity)
        summary = summarize(samples)
        ok = converged(summary, config.target_rel, config.min_samples)
        if ok or perf_counter() - started > config.budget_s:
            stats = stats_dict(summary, "wall", "wall", ok)
            stats.update(warmup_calls=warmup, cold_l2=False)
            return TimingOutcome(stats)


def _after_call(timed: TimedSet, activity: Any, cold: Any, check: bool, index: int, native: bool) -> None:
    problem = activity.problems(native=native, children=False)  # child processes: once per batch
    if problem:
        raise TimingRejected(problem)
    if cold is not None:
        persisting = cold.persisting_in_use()
        if persisting:
            raise TimingRejected(persisting)
    if check:
        failure = timed.verify()
        if failure:
            raise TimingRejected(
                f"timed call {index} wrote a wrong output (caching, replay or less work when timed; "
                f"classes 5 and 9): {failure}"
            )


def _after_batch(activity: Any) -> None:
    problem = activity.problems(native=False)
    if problem:
        raise TimingRejected(problem)
