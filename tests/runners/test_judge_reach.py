"""Issue 33, item 1: the submission cannot reach its judge, and a judge ended from inside the job is
the submission's failure, found and ended by the runner from outside the job's processes.

Real runner jobs (``execute.run``: the jail, the evaluator, its child) on the CPU device. With a
pair of job uids (a root runner) the child's signal is refused by the kernel; with one uid for
everything (``users=None``: how a runner that is not root runs, and how main ran every job) the
signal lands, and the runner must classify what follows.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners import execute, jobpolicy
from runners.identities import Rotation
from runners.slots import CPU_SLOT, StateDir
from solboard_common.protocol import JobLimits
from tests.runner_helpers import make_job, traversable_folder

ATTACK = (Path(__file__).resolve().parents[1] / "fixtures" / "jail" / "signal_judge.py").read_text()
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (two job uids)")
#: Short stages, so that the old behaviour (a stopped judge held the slot until the wall limit of
#: every stage plus 120 s) fails the timing assertion in minutes, not half an hour.
SHORT = JobLimits(compile_seconds=30, test_seconds=30, ranked_seconds=30)


def attack(signal_name: str) -> str:
    return ATTACK.replace("SIGNAL = signal.SIGKILL", f"SIGNAL = signal.{signal_name}")


@pytest.fixture
def state() -> Iterator[StateDir]:
    folder = traversable_folder()
    try:
        yield StateDir(folder / "state")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_job(source: str, state: StateDir, users: Rotation | None) -> tuple[execute.JobResult, float]:
    ctx = execute.Context(node="test", slot=CPU_SLOT, state=state, users=users)
    began = time.monotonic()
    result = execute.run(make_job(1, source=source, limits=SHORT), ctx, lambda: None)
    return result, time.monotonic() - began


@ROOT_ONLY
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_the_child_cannot_signal_its_judge(signal_name: str, state: StateDir, uid_rotation: Rotation) -> None:
    result, _ = run_job(attack(signal_name), state, uid_rotation)
    assert result.outcome == "completed", result.message
    assert result.report is not None and result.report.status.value == "PASSED", result.report
    assert "solboard-attack: refused" in result.report.log, result.report.log
    assert "can neither signal" in result.report.sandbox["judge_identity"]


def test_a_judge_killed_from_inside_its_job_is_the_submissions_failure(state: StateDir) -> None:
    """One uid for everything: the child's SIGKILL lands. Before, ``evaluator_error`` (refunded)."""
    result, _ = run_job(attack("SIGKILL"), state, None)
    assert result.outcome == "job_failed", (result.outcome, result.message)
    assert "SIGKILL" in result.message and "the submission's failure" in result.message


def test_a_stopped_judge_is_found_by_the_runner_and_frees_the_slot_in_seconds(state: StateDir) -> None:
    """One uid: the child's SIGSTOP freezes the judge and its watchdog thread. Before, the job held
    the slot until the runner's wall limit (here 210 s; 1620 s with the default limits)."""
    result, seconds = run_job(attack("SIGSTOP"), state, None)
    assert result.outcome == "job_failed", (result.outcome, result.message)
    assert "stopped by a signal" in result.message
    assert seconds < 30, seconds


def test_the_runners_wall_limit_fits_the_mode() -> None:
    limits = JobLimits()
    test_job, ranked_job = make_job(1, mode="test", limits=limits), make_job(2, mode="ranked", limits=limits)
    overhead = jobpolicy.WALL_OVERHEAD_S
    assert (
        execute.limits_for(test_job, CPU_SLOT).wall_seconds
        == limits.compile_seconds + limits.test_seconds + overhead
    )
    assert execute.limits_for(ranked_job, CPU_SLOT).wall_seconds == limits.total_seconds + overhead
