"""One timed iteration of a multi-GPU call on one rank (the child's side; its numbers are claims).

The judge starts every iteration on every rank at once (``multi_judge``); each rank then

- prepares outside the timed span: on a GPU, flushes its L2 and resets persisting lines (``l2``),
  and queues a device-side gate so the call's launches are issued before it starts (as
  ``gpu_loop`` does for one GPU);
- waits at a barrier with the other ranks, so that every rank's clock starts when the last one
  arrives (on a GPU the barrier is a one-element NCCL all-reduce on the rank's stream: the ranks
  leave it together on the devices, whatever their hosts are doing);
- times the call: CUDA events on the rank's current stream around the call (GPU), or the host
  clock (CPU development device, gloo).

The iteration's time is the maximum over the ranks (the judge takes it). Not yet on a GPU: the
CUPTI device span and the side-stream check of ``gpu_loop`` (class 1). The GPU path ran on two
H200s (docs/multigpu.md); the late-launch rule below was written from that run and has not run on a
GPU since.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import torch

from evaluator.harness.multi.rank_context import RankContext

_perf_counter_ns = perf_counter_ns


class IterationFailed(Exception):
    """The implementation raised during a timed or warm-up iteration."""


def _call(fn: Callable[..., Any], tensors: list[torch.Tensor]) -> None:
    try:
        fn(*tensors)
    except Exception as error:
        raise IterationFailed(f"{type(error).__name__}: {error}") from error


class CpuIterationTimer:
    """gloo: a barrier, then the host clock around the call (one intra-op thread per rank)."""

    method = "wall"

    def __init__(self, ctx: RankContext) -> None:
        import torch.distributed as dist

        self.ctx = ctx
        self._barrier = dist.barrier

    late = False  # the host clock holds the whole call: there is no gate to outlast

    def diagnostics(self) -> dict[str, float]:
        return {}

    def run(self, fn: Callable[..., Any], tensors: list[torch.Tensor], warmup: bool) -> float:
        self._barrier(group=self.ctx.group)
        started = _perf_counter_ns()
        _call(fn, tensors)
        return (_perf_counter_ns() - started) / 1e3


class GpuIterationTimer:
    """NCCL: cold L2, gate, device-side barrier, CUDA events around the call; late launches seen."""

    method = "events"

    def __init__(self, ctx: RankContext, cold: Any, min_gate_us: float | None = None) -> None:
        import torch.distributed as dist

        from evaluator.harness.timing.gpu_loop import GATE_MAX_US, gate_cycles, gate_for

        self.ctx, self.cold = ctx, cold
        self._all_reduce = dist.all_reduce
        self._gate_for, self._gate_cycles = gate_for, gate_cycles
        self.token = torch.zeros(1, device=ctx.device)
        self.host_launch_us: list[float] = []
        self.timed_launch_us: list[float] = []
        #: Whether the last iteration's launches outlasted its gate; how many timed ones did.
        self.late, self.late_iterations = False, 0
        self.min_gate_us = float(min_gate_us or 0.0)
        #: Until the warm-up measured the call's host launch time, the longest gate.
        self.gate_us = float(GATE_MAX_US)

    def run(self, fn: Callable[..., Any], tensors: list[torch.Tensor], warmup: bool) -> float:
        self.cold.prepare()
        gated = _perf_counter_ns()
        torch.cuda._sleep(self._gate_cycles(self.gate_us))
        self._all_reduce(self.token, group=self.ctx.group)  # queued behind the gate: a device barrier
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        issued = _perf_counter_ns()
        _call(fn, tensors)
        done = _perf_counter_ns()
        host_us, since_gate_us = (done - issued) / 1e3, (done - gated) / 1e3
        end.record()
        torch.cuda.synchronize(self.ctx.device)
        # Late: the host was still issuing the call when the gate ran out, so the span holds host time
        # (on one rank, and through the collective on every rank). Measured on the H200: a median
        # launch of 80 us with outliers to 740 us turned a 43 us all-reduce into 70 us in a third of
        # the iterations. The judge drops a late iteration (within a bound) and the gate grows.
        self.late = since_gate_us > self.gate_us
        if warmup:
            self.host_launch_us.append(host_us)
            self.gate_us = max(self.min_gate_us, self._gate_for(statistics.median(self.host_launch_us)))
        else:
            self.timed_launch_us.append(host_us)
            if self.late:
                self.late_iterations += 1
                self.gate_us = max(self.gate_us, self._gate_for(since_gate_us))
        return float(start.elapsed_time(end)) * 1e3

    def diagnostics(self) -> dict[str, float]:
        """The gate and the host's launch time of the call (a rank's own figures: shown, never trusted)."""
        launches = self.timed_launch_us or self.host_launch_us
        return {
            "gate_us": self.gate_us,
            "host_launch_us": statistics.median(launches) if launches else 0.0,
            "host_launch_max_us": max(launches) if launches else 0.0,
            "late_iterations": float(self.late_iterations),
        }


def iteration_timer(
    ctx: RankContext, cold: Any, min_gate_us: float | None = None
) -> CpuIterationTimer | GpuIterationTimer:
    """``min_gate_us``: the baseline's gate on the same shape (a kernel's gate is never shorter, as
    on one GPU: a submission cannot shorten the wait that keeps host launch time out of its span)."""
    return GpuIterationTimer(ctx, cold, min_gate_us) if ctx.device.type == "cuda" else CpuIterationTimer(ctx)
