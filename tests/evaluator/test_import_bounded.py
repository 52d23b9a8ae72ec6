"""Every problem of an import runs in a child with a time and a memory budget, and is reported as
it finishes: a task that loops or allocates without end is refused with that reason, and the
import goes on (docs/importing.md, "Bounded").

Modules: `evaluator/importers/bounded.py` (the child and its budgets), `evaluator/importers/worker.py`
(what the child runs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evaluator.importers import Options, import_problems
from tests.evaluator.import_sources import rk_task

GOOD = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    a, = data
    return a * 2

def generate_input(size, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return (torch.randn(size, device="cuda", generator=gen),)

check_implementation = make_match_reference(ref_kernel)
"""

LOOPS = GOOD.replace("    gen = torch.Generator", "    while True:\n        pass\n    gen = torch.Generator")
# numpy memory, which fake tensors cannot stand in for: the real resident set grows
ALLOCATES = GOOD.replace(
    "    gen = torch.Generator",
    "    import numpy\n    hoard = [numpy.ones(2**27) for _ in range(64)]\n    gen = torch.Generator",
)


def test_a_looping_or_allocating_task_is_refused_and_the_import_goes_on(tmp_path: Path) -> None:
    problems = tmp_path / "problems" / "probes"
    for name, source in (("a_loops_py", LOOPS), ("b_allocates_py", ALLOCATES), ("c_good_py", GOOD)):
        rk_task(problems, name, reference=source, tests=[{"size": 64, "seed": 1}])
    seen: list[tuple[str, int, int]] = []

    def progress(outcome: Any, done: int, total: int) -> None:
        seen.append((outcome.status, done, total))

    started = time.monotonic()
    report = import_problems("reference-kernels", problems, tmp_path / "out",
                             Options(time_budget_s=4, memory_budget_mib=700), progress=progress)
    elapsed = time.monotonic() - started
    loops, allocates, good = report.problems
    assert loops.status == "refused" and "time budget of 4 s" in str(loops.reason), loops.reason
    assert allocates.status == "refused" and "memory budget of 700 MiB" in str(allocates.reason), (
        allocates.reason
    )
    assert good.status == "converted", good.reason
    # reported one by one, in order, as each finished (not only at the end)
    assert seen == [("refused", 1, 3), ("refused", 2, 3), ("converted", 3, 3)]
    assert elapsed < 60


def test_problems_run_side_by_side_and_are_reported_in_order(tmp_path: Path) -> None:
    problems = tmp_path / "problems" / "probes"
    for name in ("a_py", "b_py", "c_py"):
        rk_task(problems, name, reference=GOOD, tests=[{"size": 64, "seed": 1}])
    order: list[str] = []
    report = import_problems("reference-kernels", problems, tmp_path / "out", Options(jobs=2),
                             progress=lambda outcome, done, total: order.append(str(outcome.name)))
    assert [item.status for item in report.problems] == ["converted"] * 3
    assert order == ["probes_a_py", "probes_b_py", "probes_c_py"]
