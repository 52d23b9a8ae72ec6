"""What one job may use, and what it means when the runner had to end it.

- **Limits** (``limits_from``): the runner's wall limit is the stages the job's mode runs plus an
  overhead (a test-mode job runs no ranked stage, so its ranked limit is not part of it); host
  memory and processes for all the job's processes together (its cgroup); GPU memory
  (``gpu_memory_watch``), polled through NVML from the runner, outside the job's reach.
- **Whose failure** (``job_failure``): a judge the runner did not kill, that died of a signal
  someone sends (SIGKILL, SIGTERM, ...) or that the runner found stopped, was ended by something
  inside the job (its processes, or its memory cap): the submission's failure, charged. A judge
  that crashed on its own (SIGSEGV, SIGABRT, ...) or exited without a report is the evaluator's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from evaluator.vocabulary import CPU, CUDA, Mode
from runners import nvml_probe, sandbox
from runners.slots import Slot
from solboard_common.protocol import JobLimits

#: Python start-up, torch import and report writing on top of the evaluator's own stage limits.
WALL_OVERHEAD_S = 120.0
#: The CPU development device gets an address-space cap (CUDA reserves terabytes of virtual
#: address space, so GPU jobs get none).
CPU_ADDRESS_SPACE_BYTES = 8 << 30
#: The job's host memory (cgroup), all its processes together: at most this, and at most
#: ``HOST_MEMORY_SHARE`` of the machine's memory.
JOB_MEMORY_BYTES = 32 << 30
HOST_MEMORY_SHARE = 0.75
#: The job's GPU memory, all processes on its GPUs together, when the job names no budget: this
#: share of the GPUs' memory (the rest stays for the slot's next warm spare and the driver).
GPU_MEMORY_SHARE = 0.9
#: Signals only a process sends (a fault raises none of them): a judge ended by one of these,
#: not by the runner, was ended from inside its job.
SENT_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGXCPU, signal.SIGSTOP}


def wall_seconds(limits: JobLimits, mode: Mode) -> float:
    stages = limits.compile_seconds + limits.test_seconds
    if mode == "ranked":
        stages += limits.ranked_seconds
    return stages + WALL_OVERHEAD_S


def host_memory_cap() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return JOB_MEMORY_BYTES
    return min(JOB_MEMORY_BYTES, int(physical * HOST_MEMORY_SHARE))


def limits_from(limits: JobLimits, slot: Slot, mode: Mode = "ranked") -> sandbox.Limits:
    wall = wall_seconds(limits, mode)
    address_space = None
    if slot.device == CPU:
        address_space = limits.memory_bytes or CPU_ADDRESS_SPACE_BYTES
    return sandbox.Limits(
        wall_seconds=wall,
        # A runaway backstop: the wall limit is the real one; torch may use every core.
        cpu_seconds=int(wall * (os.cpu_count() or 1)) + 1,
        file_bytes=limits.file_bytes,
        processes=limits.processes,
        address_space_bytes=address_space,
        stdout_bytes=sandbox_report_bytes(),
        stderr_bytes=limits.log_bytes,
        memory_bytes=host_memory_cap(),
        # RLIMIT_NPROC counts per uid: the judge's and the untrusted processes' each; the group
        # counts them all.
        cgroup_processes=2 * limits.processes,
    )


def sandbox_report_bytes() -> int:
    """The report is stdout; it may be long (every check of every shape), so its cap is generous."""
    return 16 << 20


def gpu_memory_budget(limits: JobLimits, slot: Slot) -> int | None:
    if slot.device != CUDA:
        return None
    total = nvml_probe.memory_of(slot.gpu_indices)
    if not total:
        return limits.gpu_memory_bytes
    share = int(total * GPU_MEMORY_SHARE)
    return min(share, limits.gpu_memory_bytes) if limits.gpu_memory_bytes else share


def gpu_memory_watch(
    limits: JobLimits, slot: Slot, used: Callable[[tuple[int, ...]], int] = nvml_probe.memory_used
) -> Callable[[], str | None]:
    """A Spec's watch: the memory every process holds on the slot's GPUs against the job's budget
    (NVML, from the runner: no call the job makes can lift or hide it). Only the job runs there:
    other slots' spares are stopped before it starts."""
    budget = gpu_memory_budget(limits, slot)
    if budget is None:
        return lambda: None

    def watch() -> str | None:
        held = used(slot.gpu_indices)
        if held > budget:
            return (f"its processes held {held / 2**30:.1f} GiB of GPU memory, above the job's budget of "
                    f"{budget / 2**30:.1f} GiB; the job was ended")
        return None

    return watch


def job_failure(result: sandbox.Result) -> str | None:
    """Why the job ended as the submission's own failure though no report came (None: it did not)."""
    if result.timed_out or result.cancelled:
        return None
    if result.ended_for:
        return f"the job was ended by the runner: {result.ended_for}"
    if result.oom_kills and result.returncode != 0:
        return (
            f"the job ran past its host memory cap ({result.oom_kills} process(es) killed by the kernel's "
            "OOM killer in the job's cgroup)"
        )
    if result.returncode < 0 and -result.returncode in SENT_SIGNALS and not result.jail_failed:
        return (
            f"the judge was killed by {sandbox.signal_name(result.returncode)}, which only a process sends, "
            "and not by the runner: something inside the job killed it"
        )
    return None
