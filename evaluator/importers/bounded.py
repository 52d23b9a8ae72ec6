"""Each problem's import in a child process with a time and a memory budget.

Converting runs upstream code (generators, references, checks) that can loop, allocate gigabytes or
crash the interpreter. Each problem therefore runs in its own child, forked from a server process
that has already imported torch and the importers (``multiprocessing``'s forkserver with those
modules preloaded: a child starts in milliseconds, not the seconds an import of torch takes). The
parent polls every child: past its time budget, or with a resident set above its memory budget,
the child's process group is killed and the problem is refused with that reason; an address-space
limit inside the child backs the memory poll up between two polls. The parent reports each
problem as it finishes and installs nothing a child did not finish.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evaluator.importers.worker import Task

#: Defaults of --time-budget and --memory-budget: enough for the largest public task on a 2-core
#: machine shared with other work (GPU MODE's pmpp sort_py, whose generator loops over 10,000 rows
#: under fake tensors at its largest benchmark, took 100-145 s there), small enough that a runaway
#: task cannot stall a whole-tree import or the machine.
TIME_BUDGET_S = 300.0
MEMORY_BUDGET_MIB = 4096
#: How often the parent looks at its children.
POLL_S = 0.05
#: The address-space limit a child sets on itself: what it already maps (torch's libraries) plus
#: its budget plus this slack (thread stacks, allocator arenas), so the poll decides in practice.
ADDRESS_SLACK = 4 * 2**30

#: What the fork server imports once, so no child pays for it: torch, the fake tensors' own imports
#: (torch._dynamo, several seconds), and every module an import uses.
_PRELOAD = [
    "torch",
    "torch._dynamo",
    "torch._subclasses.fake_tensor",
    "yaml",
    "evaluator.importers.worker",
    "evaluator.importers.reference_kernels",
    "evaluator.importers.sol_execbench",
    "evaluator.importers.validate",
    "evaluator.importers.independent",
    "evaluator.importers.sxb_adapter",
    "evaluator.importers.rk_adapter",
    "evaluator.problems.selfcheck",
    "evaluator.importers.render",
    "evaluator.importers.provenance",
    "evaluator.importers.sxb_cpu_shape",
]


@dataclass(frozen=True)
class Budget:
    seconds: float = TIME_BUDGET_S
    memory_mib: int = MEMORY_BUDGET_MIB


def _child(conn: Connection, task: dict[str, Any], environment: dict[str, str], memory_bytes: int) -> None:
    os.setpgrp()  # the parent kills the whole group: upstream code may start processes of its own
    os.environ.clear()
    os.environ.update(environment)
    mapped = _vm_size()
    if mapped:
        limit = mapped + memory_bytes + ADDRESS_SLACK
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from evaluator.importers.worker import run

    conn.send(run(Task(**task)))
    conn.close()


def _vm_size(pid: int | str = "self") -> int:
    return _status_kib(pid, "VmSize:") * 1024


def resident_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS:") * 1024


def _status_kib(pid: int | str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


@dataclass
class _Running:
    index: int
    task: Task
    process: Any
    conn: Connection
    started: float


def _context() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _start(context: Any, index: int, task: Task, budget: Budget) -> _Running:
    parent, child = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(child, asdict(task), dict(os.environ), budget.memory_mib * 2**20), daemon=True
    )
    process.start()
    child.close()
    return _Running(index, task, process, parent, time.monotonic())


def _kill(running: _Running) -> None:
    try:
        os.killpg(running.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # not yet a group leader: the child alone
        running.process.kill()
    running.process.join(5)


def _refused(task: Task, reason: str) -> dict[str, Any]:
    from evaluator.importers.provenance import source_reference

    return {
        "source": source_reference(Path(task.folder), Path(task.root), task.source_repo),
        "status": "refused",
        "reason": reason,
        "name": task.name,
        "dropped": [],
        "notes": [],
        "rankable": False,
        "counts": "missing",
        "shapes": 0,
        "version": None,
        "digest": "",
        "staged": None,
        "cpu_seconds": 0.0,
    }


def _finished(running: _Running, budget: Budget) -> dict[str, Any] | None:
    """The child's result when it is done (or killed), None while it runs within its budget."""
    if running.conn.poll():
        try:
            result = running.conn.recv()
        except (EOFError, OSError):
            result = _refused(running.task, "the import process died without a result")
        running.process.join(5)
        return result
    elapsed = time.monotonic() - running.started
    if not running.process.is_alive():
        code = running.process.exitcode
        return _refused(
            running.task,
            f"the import process died (exit code {code}: killed by a signal, out of "
            "memory, or a crash in native code)",
        )
    if elapsed > budget.seconds:
        return _killed(running, f"exceeded its time budget of {budget.seconds:g} s (--time-budget); the "
                                "reference or the generator runs too long on the CPU")
    if resident_bytes(running.process.pid) > budget.memory_mib * 2**20:
        return _killed(running, f"exceeded its memory budget of {budget.memory_mib} MiB (--memory-budget)")
    return None


def _killed(running: _Running, reason: str) -> dict[str, Any]:
    cpu = _cpu_seconds(running.process.pid)
    _kill(running)
    return {**_refused(running.task, reason), "cpu_seconds": cpu}


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a live process (/proc/PID/stat fields 14 and 15)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def run_bounded(
    tasks: list[Task], budget: Budget, jobs: int = 1, before_start: Callable[[int, Task], Task] | None = None
) -> Iterator[tuple[int, dict[str, Any], float]]:
    """Each task in a bounded child, at most ``jobs`` at a time; yields (index, result, seconds)
    as each finishes. ``before_start`` may complete a task with what earlier results told. The
    fork server is stopped at the end: a process that imports (a test, the management command)
    keeps no helper processes alive afterwards."""
    context = _context()
    try:
        yield from _run_all(context, tasks, budget, jobs, before_start)
    finally:
        _stop_helpers()


def _stop_helpers() -> None:
    """multiprocessing's fork server and resource tracker, which it starts once per process and
    never stops; its own tests stop them with these (private) methods."""
    from multiprocessing import forkserver, resource_tracker

    for helper in (
        getattr(forkserver, "_forkserver", None),
        getattr(resource_tracker, "_resource_tracker", None),
    ):
        stop = getattr(helper, "_stop", None)
        if callable(stop):
            stop()


def _run_all(context: Any, tasks: list[Task], budget: Budget, jobs: int,
             before_start: Callable[[int, Task], Task] | None) -> Iterator[tuple[int, dict[str, Any], float]]:
    pending = list(enumerate(tasks))
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                index, task = pending.pop(0)
                task = before_start(index, task) if before_start is not None else task
                running.append(_start(context, index, task, budget))
            for item in list(running):
                result = _finished(item, budget)
                if result is None:
                    continue
                running.remove(item)
                yield item.index, result, time.monotonic() - item.started
            time.sleep(POLL_S)
    finally:  # an interrupted import leaves no child behind
        for item in running:
            _kill(item)
