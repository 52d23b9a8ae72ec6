"""The multi-GPU timer's gate: a late launch is seen, the gate grows, and the judge drops late
iterations within a bound. The GPU timer runs here against stand-ins for its CUDA calls and clock
(the CPU has no gate); on two H200s it ran for real (docs/multigpu.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from evaluator.harness.multi import rank_timers
from evaluator.harness.multi.multi_judge import MIN_SAMPLES, Iterations, drop_late


class FakeEvent:
    def __init__(self, enable_timing: bool = True) -> None:
        self.stamp = 0.0

    def record(self) -> None:
        pass

    def elapsed_time(self, other: Any) -> float:
        return 0.05  # ms


def gpu_timer(monkeypatch: Any, launch_us: list[float]) -> tuple[rank_timers.GpuIterationTimer, list[float]]:
    """A timer whose call takes ``launch_us[i]`` of host time on iteration i; the gate lengths it asked
    for."""
    clock = {"ns": 0}
    gates: list[float] = []
    calls = iter(launch_us)

    def tick() -> int:
        return clock["ns"]

    def call(fn: Any, tensors: Any) -> None:
        clock["ns"] += int(next(calls) * 1000)

    monkeypatch.setattr(rank_timers, "_perf_counter_ns", tick)
    monkeypatch.setattr(rank_timers, "_call", call)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    ctx = SimpleNamespace(device=torch.device("cpu"), group=None)
    cold = SimpleNamespace(prepare=lambda: None)
    timer = rank_timers.GpuIterationTimer.__new__(rank_timers.GpuIterationTimer)
    timer.ctx, timer.cold = ctx, cold
    timer._all_reduce = lambda tensor, group=None: None
    timer._gate_for = multi_timing_gate_for
    timer._gate_cycles = lambda gate_us: gates.append(gate_us) or 0
    timer.token = None
    timer.host_launch_us, timer.timed_launch_us = [], []
    timer.late, timer.late_iterations = False, 0
    timer.min_gate_us, timer.gate_us = 0.0, 1000.0
    return timer, gates


def multi_timing_gate_for(host_us: float) -> float:
    from evaluator.harness.timing.gpu_loop import gate_for

    return gate_for(host_us)


def test_a_launch_that_outlasts_the_gate_is_late_and_the_gate_grows(monkeypatch: Any) -> None:
    timer, gates = gpu_timer(monkeypatch, [80.0, 80.0, 80.0, 90.0, 740.0, 90.0])
    for _ in range(3):
        timer.run(lambda: None, [], warmup=True)
    assert timer.gate_us == 2 * 80.0 + 20.0  # from the warm-up's median launch
    timer.run(lambda: None, [], warmup=False)
    assert timer.late is False
    timer.run(lambda: None, [], warmup=False)  # 740 us of host time behind a 180 us gate
    assert timer.late is True and timer.late_iterations == 1
    assert timer.gate_us == 1000.0  # grown to 2 x 740 + 20 us, cut to the longest gate (GATE_MAX_US)
    timer.run(lambda: None, [], warmup=False)
    assert timer.late is False and gates[-1] == timer.gate_us
    assert timer.diagnostics()["late_iterations"] == 1.0


def test_a_call_whose_host_time_always_outlasts_the_longest_gate_stays_late(monkeypatch: Any) -> None:
    timer, _ = gpu_timer(monkeypatch, [1500.0] * 8)
    for warm in (True, True, True, False, False, False, False, False):
        timer.run(lambda: None, [], warmup=warm)
    assert timer.gate_us == 1000.0 and timer.late is True and timer.late_iterations == 5


def test_late_iterations_are_dropped_at_most_min_samples_plus_the_number_kept() -> None:
    iterations = Iterations(per_rank_us=[[], []])
    iterations.last_late = True
    dropped = 0
    while drop_late(iterations):
        iterations.late_dropped += 1
        dropped += 1
    assert dropped == MIN_SAMPLES  # nothing kept yet: then late iterations are measured as they are
    iterations.samples_us.extend([1.0] * 5)
    assert drop_late(iterations)  # five kept: five more may be dropped
    iterations.last_late = False
    assert not drop_late(iterations)  # an iteration on time is always kept
