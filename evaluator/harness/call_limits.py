"""How long one call of the submission may run before the judge ends it (``TIMEOUT``).

A stage limit alone let a kernel that never returns (``while True: pass``, a GPU kernel that spins)
hold its runner slot for minutes: 300 s in test mode, 900 s in ranked mode. A call has a natural
budget instead: the problem's baseline, which the judge timed on the same shape before the
submission was imported. A call may take ``STEADY_FACTOR`` times the baseline's median plus
``STEADY_FLOOR_S`` (a slow but honest kernel is not a hung one: 100x the vendor library is far
beyond any ranking, and the floor covers a Python call's own overhead, a garbage collection or a
busy host); the judge kills the child's process group past that and says which call and which limit.

The first call of a shape in a stage may compile and autotune (Triton's JIT and ``@triton.autotune``,
``torch.compile``, a library's lazy set-up), so it gets ``FIRST_CALL_S`` instead, bounded so that a
kernel that hangs from its first call still ends a test-mode job on a GPU in under 30 s (the CPU
development device, on shared machines, allows more). Measured first
calls: ``torch.compile`` of a vector add on this project's 2-core CPU machine (cold caches, gcc,
Inductor's import) 11.2 s for the first shape, 1.2 s for the next one; a Triton ``@triton.autotune``
kernel on the H200 re-tuning under Nsight Compute 12-390 ms a shape (docs/harness.md, "Call limits").
Compilation at import time (the compile stage) is not limited by this.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A steady call may take this many times the baseline's median on the same shape...
STEADY_FACTOR = 100.0
#: ...plus this many seconds.
STEADY_FLOOR_S = 1.0
#: The first call of a shape in a stage (compilation, autotuning), by device. The CPU device is a
#: development aid on shared machines, where torch.compile builds C++ with gcc: 11.2 s idle on this
#: project's 2 cores, 40-47 s with a load average of 6; a runner's GPU host has 16 cores.
FIRST_CALL_S = {"cuda": 15.0, "cpu": 90.0}
#: A call under Nsight Compute: every kernel is serialised and measured (~12 ms each on the H200),
#: so the witness gets a bound of its own, still far below the witness session's whole limit.
WITNESS_CALL_S = 60.0


@dataclass(frozen=True)
class CallLimit:
    """The seconds one call may take, and the rule that gave them (for the TIMEOUT message)."""

    seconds: float
    rule: str


def call_limit(baseline_median_us: float | None, first: bool, device: str = "cuda",
               first_call_s: float | None = None) -> CallLimit:
    """The limit of one call on a shape whose baseline median is ``baseline_median_us`` (None when
    the baseline has no timing: the floor alone, or the first-call allowance: ``first_call_s``, by
    default the device's)."""
    steady = STEADY_FLOOR_S + STEADY_FACTOR * max(baseline_median_us or 0.0, 0.0) * 1e-6
    if first:
        allowance = FIRST_CALL_S[device] if first_call_s is None else first_call_s
        return CallLimit(
            max(allowance, steady),
            f"the first call of a shape, which may compile and autotune: {allowance:g} s",
        )
    baseline = f"{baseline_median_us:.1f} us" if baseline_median_us else "none"
    return CallLimit(steady, f"{STEADY_FACTOR:g} x the baseline's median ({baseline}) + {STEADY_FLOOR_S:g} s")


def witness_call_limit(claimed_median_us: float | None) -> CallLimit:
    """A witnessed call (ncu serialises and measures every kernel)."""
    seconds = WITNESS_CALL_S + STEADY_FACTOR * max(claimed_median_us or 0.0, 0.0) * 1e-6
    return CallLimit(
        seconds, f"a call under Nsight Compute: {WITNESS_CALL_S:g} s + {STEADY_FACTOR:g} x its median"
    )
