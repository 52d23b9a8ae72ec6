"""GPU timing loop: profiled batches, device spans from CUPTI, CUDA events as the cross-check.

See ``timing`` for the method; ``trace`` for how operations are attributed to calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from evaluator.harness.timing import trace as tracing
from evaluator.harness.timing.loop import (
    BATCH_SECONDS,
    EVENT_EXCESS_REL,
    EVENT_EXCESS_US,
    TimedSet,
    TimingConfig,
    TimingOutcome,
    TimingRejected,
    _after_batch,
    _after_call,
    _call,
    _elapsed_ms,
    _Event,
    _prepare,
    _record,
    _sample_checks,
    _synchronize,
    stats_dict,
)
from evaluator.harness.timing.stats import converged, summarize

_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
#: Most warm-up calls (a 25 ms warm-up of a 5 us kernel needs a few hundred).
WARMUP_MAX_CALLS = 2048
#: Bound at import, before any submission runs: the device-side spin of the launch gate.
_spin = torch.cuda._sleep
#: The gate is GATE_FACTOR x the host launch time + GATE_MARGIN_US, within GATE_*_US (the kernel's
#: is at least the baseline's).
#: Without it the harness's synchronise after each call leaves the GPU idle when the next call
#: starts, and a call of several launches waits on the host between them: on the H200 a cuBLAS
#: memset + GEMM (4096^3) spanned 179 us instead of 173 us back to back, a 3-launch rmsnorm 41 us
#: instead of 24 us, and its batch medians drifted by up to 70% with the VM's launch latency
#: (docs/harness.md, the launch gate). Host work hidden behind the gate buys a submission nothing:
#: an answer computed on the host must still be copied to the device, and the copy is timed. The
#: upper bound keeps longer host work visible: beyond it, gaps show in the span and the events
#: (class 14) as before.
GATE_FACTOR = 2.0
GATE_MARGIN_US = 20.0
GATE_MIN_US = 20.0
GATE_MAX_US = 1000.0


@dataclass
class _Batch:
    spans_us: list[float] = field(default_factory=list)
    events_us: list[float] = field(default_factory=list)
    names: list[list[str]] = field(default_factory=list)
    wall_s: float = 0.0


@dataclass
class GpuTimer:
    fn: Callable[..., Any]
    sets: list[TimedSet]
    config: TimingConfig
    cold: Any
    activity: Any
    calls: int = 0
    cupti: bool = True
    flags: list[str] = field(default_factory=list)
    gate_cycles: int = 0
    host_us: list[float] = field(default_factory=list)

    def _one(self, index: int, check: bool, starts: list[Any], ends: list[Any], marker: torch.Tensor) -> None:
        timed = self.sets[self.calls % len(self.sets)]
        self.calls += 1
        with record_function("sb#h"):
            _prepare(timed, self.cold)
            if self.gate_cycles:
                _spin(self.gate_cycles)
        with record_function(f"sb#c{index}"):
            _record(starts[index])
            issued = perf_counter()
            _call(self.fn, timed)
            self.host_us.append((perf_counter() - issued) * 1e6)
            _record(ends[index])
        with record_function(f"sb#m{index}"):
            marker.add_(1)
        with record_function("sb#h"):
            _synchronize()
            timed.finished()
            _after_call(timed, self.activity, self.cold, check, self.calls, native=True)

    def batch(
        self, size: int | None, min_calls: int = 0, min_s: float = 0.0, profiled: bool = True
    ) -> _Batch:
        """``size`` calls (or, for the warm-up, at least ``min_calls`` and ``min_s``).

        Profiled batches give device spans; unprofiled ones give the CUDA-event cross-check, free of
        the profiler's host overhead (which would otherwise inflate events by 20-100 us a call).
        """
        starts = [_Event(enable_timing=True) for _ in range(size or WARMUP_MAX_CALLS)]
        ends = [_Event(enable_timing=True) for _ in range(len(starts))]
        marker = torch.zeros(1, device="cuda")
        checks = _sample_checks(self.config.checks_per_batch, size) if size else set()
        begun = perf_counter()
        count = 0
        with profile(activities=_ACTIVITIES) if profiled else nullcontext() as prof:
            while count < len(starts):
                self._one(count, count in checks, starts, ends, marker)
                count += 1
                if size is None and count >= min_calls and perf_counter() - begun >= min_s:
                    break
        _after_batch(self.activity)
        result = _Batch(wall_s=perf_counter() - begun)
        result.events_us = [_elapsed_ms(starts[i], ends[i]) * 1e3 for i in range(count)]
        if profiled:
            self._spans(prof, count, result)
        return result

    def _spans(self, prof: Any, count: int, result: _Batch) -> None:
        try:
            events = list(prof.profiler.kineto_results.events())
            batch = tracing.attribute(events)
        except Exception as error:  # no CUPTI: fall back to events, flagged
            self._no_cupti(f"kernel timestamps unreadable ({type(error).__name__}: {error})")
            return
        if not any(batch.calls.get(i) and batch.calls[i].ops for i in range(count)):
            self._no_cupti("no kernel timestamps recorded (CUPTI unavailable?)")
            return
        if batch.strays:
            names = sorted({op.name for op in batch.strays})[:5]
            raise TimingRejected(
                f"device work launched outside the timed call by another thread (class 2): {names}"
            )
        for i in range(count):
            call = batch.calls.get(i) or tracing.CallTrace()
            if not call.ops:
                raise TimingRejected(f"timed call {i} launched no device work (classes 5 and 9)")
            late = call.unjoined()
            if late:
                raise TimingRejected(
                    "work on another stream was not joined back to the current stream (class 1): "
                    f"{late[0].name}"
                )
            result.spans_us.append(call.span_ns / 1e3)
            result.names.append(call.names)

    def _no_cupti(self, why: str) -> None:
        if self.cupti:
            self.flags.append(
                f"device span unavailable, ranked by CUDA events; other-stream check not done: {why}"
            )
        self.cupti = False


def _compare_kernel_sets(warmup: list[str], timed: list[list[str]], notes: list[str]) -> None:
    """A note, not a verdict: ragged inputs (grouped GEMM's empty groups) legitimately change the
    launches from call to call. Less work when timed (class 9) is caught by checking the outputs
    of randomly sampled timed calls."""
    if not warmup:
        return
    fewest = min((len(names) for names in timed), default=len(warmup))
    if fewest < len(warmup):
        notes.append(
            f"some timed calls launched fewer device operations ({fewest}) than the last warm-up "
            f"call ({len(warmup)}); their sampled outputs were checked"
        )
    elif any(Counter(names) != Counter(warmup) for names in timed):
        notes.append("the set of device operations changed between calls")


def _ranked(
    spans: list[float], events: list[float], cupti: bool, allowance_us: float
) -> tuple[str, list[float], dict[str, Any]]:
    event_summary = summarize(events)
    if not cupti:
        return "events", events, {"event_median_us": event_summary.median}
    span_summary = summarize(spans)
    gap = event_summary.median - span_summary.median
    extra = {
        "event_median_us": event_summary.median,
        "disagreement_rel": gap / span_summary.median if span_summary.median > 0 else None,
    }
    if gap > max(EVENT_EXCESS_REL * span_summary.median, EVENT_EXCESS_US) + allowance_us:
        return "events", events, extra
    return "device_span", spans, extra


def judged_side_by_side(
    spans: list[float], spans_again: list[float], events_again: list[float], allowance_us: float
) -> tuple[str, list[float], dict[str, Any]]:
    """The second look behind the longest gate: the events measured again are compared with the
    spans measured just before them (``spans_again``); the span ranks with every span measured
    (``spans``), the events only when they still outrun their neighbours (class 14)."""
    source, _, extra = _ranked(spans_again, events_again, True, allowance_us)
    extra["events_remeasured"] = True
    return source, (spans if source == "device_span" else events_again), extra


def longer_gate(source: str, cupti: bool, gate_us: float) -> float | None:
    """The gate to measure the events behind again before a class-14 flag, or None: only when the
    events outran the device span and the gate was shorter than its longest."""
    if source == "events" and cupti and gate_us < GATE_MAX_US:
        return GATE_MAX_US
    return None


def gate_for(host_launch_us: float) -> float:
    return min(max(GATE_FACTOR * host_launch_us + GATE_MARGIN_US, GATE_MIN_US), GATE_MAX_US)


def gate_cycles(gate_us: float) -> int:
    """Spin cycles for ``gate_us`` at the SM's top clock (a lower clock only lengthens the gate)."""
    khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0) or 2_000_000
    return int(gate_us * khz / 1000)


def time_gpu(
    fn: Callable[..., Any], sets: list[TimedSet], config: TimingConfig, cold: Any, activity: Any
) -> TimingOutcome:
    timer = GpuTimer(fn, sets, config, cold, activity)
    warm = timer.batch(None, config.warmup_calls, config.warmup_s)
    warmup_names = warm.names[-1] if warm.names else []
    warmup_calls = timer.calls
    host_launch_us = summarize(timer.host_us[-32:]).median
    # At least the baseline's gate; longer where this call takes longer to issue (a Triton launcher,
    # many small launches), up to GATE_MAX_US: host work beyond that shows as before.
    gate_us = max(config.gate_us or 0.0, gate_for(host_launch_us))
    timer.gate_cycles = gate_cycles(gate_us)
    per_call = max(warm.wall_s / max(warmup_calls, 1), 1e-6)
    size = int(min(max(BATCH_SECONDS / per_call, 4), config.max_batch))
    spans: list[float] = []
    events: list[float] = []
    names: list[list[str]] = []
    started = perf_counter()
    while True:
        profiled = timer.batch(size)
        spans += profiled.spans_us
        names += profiled.names
        # The cross-check needs a robust median, not a 0.5% CI: a quarter of the calls suffice.
        events += timer.batch(max(size // 4, 4), profiled=False).events_us
        primary = spans if timer.cupti else events
        ok = converged(summarize(primary), config.target_rel, config.min_samples)
        if ok or perf_counter() - started > config.budget_s:
            break
    source, ranked, extra = _ranked(spans, events, timer.cupti, config.launch_allowance_us)
    compared_spans = spans  # the spans the events were judged against
    if retry_gate_us := longer_gate(source, timer.cupti, gate_us):
        # On the H200 an honest Triton launcher once showed CUDA events 50+ us above its device
        # span (flagged, class 14) and none in two reruns. Before flagging, the events are
        # measured again behind the longest gate the design allows: launch latency the shorter gate
        # left in the events disappears, host work inside the call beyond GATE_MAX_US does not.
        gate_us, timer.gate_cycles = retry_gate_us, gate_cycles(retry_gate_us)
        events = timer.batch(max(size // 2, 8), profiled=False).events_us
        source, ranked, extra = _ranked(spans, events, timer.cupti, config.launch_allowance_us)
        extra["gate_retried"] = True
    elif source == "events" and timer.cupti and (again := timer.batch(max(size // 2, 8))).spans_us:
        # Already behind the longest gate. On the H200 an honest moe_gemm_swiglu example (a host
        # sync and ~35 launches a call, GB-sized temporaries, the GPU throttling) once had events 12%
        # above its span (flagged) and no excess in its rerun; the spans and the events it was judged
        # on came from batches measured apart. Both are measured again, one batch right after the
        # other, and the flag is decided on that pair: host work inside every call shows in it again.
        events = timer.batch(max(size // 2, 8), profiled=False).events_us
        spans, compared_spans = spans + again.spans_us, again.spans_us
        names += again.names
        source, ranked, extra = judged_side_by_side(spans, compared_spans, events, config.launch_allowance_us)
    notes: list[str] = []
    _compare_kernel_sets(warmup_names, names, notes)
    summary = summarize(ranked)
    method = "cupti" if timer.cupti else "events"
    stats = stats_dict(summary, method, source, converged(summary, config.target_rel, config.min_samples))
    stats.update(extra)
    stats.update(kernels_per_call=(names[-1] if names else [])[:32], warmup_calls=warmup_calls, cold_l2=True,
                 host_launch_us=host_launch_us, gate_us=gate_us)
    notes += timer.flags  # no CUPTI: ranked by events, said so; not the submission's doing
    flags: list[str] = []
    if source == "events" and timer.cupti:
        flags.append(
            f"the call's CUDA-event time ({extra['event_median_us']:.1f} us) exceeds its device span "
            f"({summarize(compared_spans).median:.1f} us) by more than the baseline's launch overhead "
            f"({config.launch_allowance_us:.1f} us) plus 10%/50 us: host work or gaps (class 14), "
            "ranked by CUDA events"
        )
    return TimingOutcome(stats, flags, notes)
