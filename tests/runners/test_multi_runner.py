"""Multi-GPU jobs on the runner side: a job with gpu_count > 1 tells the evaluator its
world size, never goes to a warm spare (one child, not W ranks), and runs its W ranks in the jail
on the CPU development device (gloo over the jail's loopback)."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

from runners import execute
from runners.identities import Rotation
from runners.slots import Slot, StateDir
from runners.spares import Spare, spare_limits
from solboard_common.protocol import Job, gpu_queue
from tests.harness_helpers import REPO
from tests.runner_helpers import traversable_folder

#: The CPU device serving two ranks: the slot a gpu.cpu.x2 queue would have.
CPU_X2 = Slot(key="cpux2", device="cpu", gpu_type="cpu", gpu_indices=(), queue=gpu_queue("cpu", 2))


def allreduce_job(gpu_count: int = 2) -> Job:
    source = (REPO / "examples" / "python" / "allreduce.py").read_text()
    return Job(job_id=f"multi-{time.monotonic_ns()}", evaluation_id=7, problem="allreduce", problem_version=1,
               language="python", source=source, source_sha256=hashlib.sha256(source.encode()).hexdigest(),
               mode="test", seed=4242, gpu_type="cpu", gpu_count=gpu_count)


def test_a_multi_gpu_job_tells_the_evaluator_its_world_size(tmp_path: Path) -> None:
    inputs = execute.JobInputs(tmp_path / "submission.py", None, tmp_path / "artifacts", None)
    ctx = execute.Context(node="test", slot=CPU_X2, state=StateDir(tmp_path / "state"), users=None)
    argv = execute.evaluator_argv(allreduce_job(2), ctx, inputs)
    assert argv[argv.index("--world-size") + 1] == "2"
    assert "--world-size" not in execute.evaluator_argv(allreduce_job(1), ctx, inputs)


def test_a_multi_gpu_job_never_runs_in_a_warm_spare() -> None:
    unused: Any = None
    spare = Spare("cpux2", (), unused, unused, "marker", spare_limits(CPU_X2), time.monotonic())
    assert "multi-GPU job runs 2 fresh ranks" in (spare.fits(allreduce_job(2), CPU_X2) or "")
    assert spare.fits(allreduce_job(1), CPU_X2) is None


def test_a_multi_gpu_job_runs_its_ranks_in_the_jail_on_the_cpu_device(uid_rotation: Rotation | None) -> None:
    folder = traversable_folder()  # the job user must reach its scratch folder
    try:
        ctx = execute.Context(node="test", slot=CPU_X2, state=StateDir(folder / "state"), users=uid_rotation)
        result = execute.run(allreduce_job(2), ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert result.outcome == "completed", result.message + result.log[-2000:]
    report = result.report
    assert report is not None
    assert report.status.value == "PASSED", report.message
    assert report.world_size == 2
    assert all(shape.timing and len(shape.timing.rank_median_us or []) == 2 for shape in report.shapes)
    if (
        uid_rotation is not None
    ):  # as root: the jail's own network namespace, so the ranks talked over its loopback
        assert report.sandbox["network"].startswith("namespace"), report.sandbox["network"]
