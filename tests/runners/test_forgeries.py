"""Forging a result from inside a job (class 16), both ways a result is made: the evaluator run
directly, and a ranked runner job in the jail (CPU development device). Only the judge's verdicts
count: the child's word, its channel and its log cannot make a result."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest

from runners import execute
from runners.slots import Slot, StateDir
from solboard_common.protocol import Job
from tests.harness_helpers import CHEATS, REPO, evaluate_file
from tests.runner_helpers import traversable_folder

RANKED = ("--device", "cpu", "--mode", "ranked", "--secret-seed-stdin")
#: fixture -> words the REJECTED message must contain
FORGERIES = {
    "c16_early_ready": "forged report",
    "c16_patch_json_encoder": "timing not confirmed",
}


def runner_job(source: str) -> Job:
    return Job(
        job_id=f"forgery-{time.monotonic_ns()}",
        evaluation_id=1,
        problem="vector_add",
        problem_version=1,
        language="python",
        source=source,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        mode="ranked",
        seed=424242,
        gpu_type="cpu",
    )


def run_in_runner(source: str, job_users: object) -> execute.JobResult:  # type: ignore[name-defined]
    folder = traversable_folder()
    state = StateDir(folder / "state")
    slot = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
    ctx = execute.Context(node="test", slot=slot, state=state, users=job_users, calibration=None)  # type: ignore[arg-type]
    try:
        return execute.run(runner_job(source), ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_result_is_rejected_by_the_evaluator(name: str) -> None:
    report = evaluate_file("vector_add", CHEATS / f"{name}.py", *RANKED, stdin="424242\n")
    assert report["status"] == "REJECTED", report["message"]
    assert FORGERIES[name] in report["message"]
    assert not report["rank_eligible"] and report["problem_score"] is None


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_result_is_rejected_in_a_runner_job(name: str, uid_rotation: object) -> None:
    result = run_in_runner((CHEATS / f"{name}.py").read_text(), uid_rotation)
    assert result.outcome == "completed", result.message
    assert result.report is not None
    assert result.report.status.value == "REJECTED", result.report.message
    assert FORGERIES[name] in result.report.message
    assert not result.report.rank_eligible


def test_an_honest_runner_job_is_witnessed(uid_rotation: object) -> None:
    result = run_in_runner((REPO / "examples" / "python" / "vector_add.py").read_text(), uid_rotation)
    assert result.report is not None and result.report.status.value == "PASSED", result.message
    assert result.report.witnessed
    assert all(shape.witness is not None and shape.witness.confirmed for shape in result.report.shapes)


def test_a_log_swapped_for_a_fifo_does_not_block_the_judge() -> None:
    started = time.monotonic()
    report = evaluate_file("vector_add", CHEATS / "c16_log_fifo.py", "--device", "cpu", "--mode", "ranked")
    assert time.monotonic() - started < 120
    assert report["status"] == "PASSED", report["message"]  # the swap changes nothing it is judged on
    assert report["witnessed"]


def test_the_judge_is_not_dumpable_so_a_child_cannot_read_its_memory() -> None:
    report = evaluate_file(
        "vector_add", Path(REPO / "examples" / "python" / "vector_add.py"), "--device", "cpu"
    )
    assert report["sandbox"]["judge_memory"].startswith("not dumpable")
