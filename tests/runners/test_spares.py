"""Warm spares of a runner slot (runners/spares.py, runners/spare_keeper.py) on the real CPU runner
path: the real jail, the slot's job uids (when root), ``python -m evaluator serve-spare``,
``execute.run``.

A spare serves one job and is gone; a killed spare is replaced; a job runs when there is no spare
(or the spare is not fit when handed the job); a spare stages while a job runs but warms its device
only while no job holds the slot's GPUs; a job stops other slots' warm spares on its GPUs; ranked
jobs send their provisional report before the final one.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evaluator.report import EvaluationReport
from runners import execute, procs, sandbox
from runners.identities import Rotation
from runners.slots import Slot, StateDir
from runners.spare_keeper import SpareKeeper
from runners.spares import Spare, stop_overlapping_spares
from solboard_common.protocol import Job, JobLimits, JobResult
from tests.runner_helpers import make_job, traversable_folder

CPU_SLOT = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
READY_WITHIN_S = 180.0


@pytest.fixture
def ctx(uid_rotation: Rotation | None) -> Iterator[execute.Context]:
    folder = traversable_folder()  # the job user must reach its scratch folder
    try:
        yield execute.Context(
            node="test", slot=CPU_SLOT, state=StateDir(folder / "state"), users=uid_rotation
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def keeper(ctx: execute.Context) -> Iterator[SpareKeeper]:
    kept = SpareKeeper(ctx, spares=1).start()
    yield kept
    kept.stop()


def eventually(condition: Callable[[], object], within_s: float = READY_WITHIN_S, what: str = "") -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {within_s} s: {what}"
        time.sleep(0.1)


def ready_spare(keeper: SpareKeeper) -> Spare:
    def ready() -> bool:
        spare = keeper.spare()
        if spare is None:
            return False
        with keeper._cond:  # the keeper's thread polls it too
            spare.poll()
        return spare.ready

    eventually(ready, what="a ready spare")
    spare = keeper.spare()
    assert spare is not None
    return spare


def run_job(keeper: SpareKeeper, ctx: execute.Context, job: Job,
            on_provisional: execute.OnProvisional | None = None) -> tuple[Spare | None, JobResult]:
    """What a slot's worker does with a delivery (jobflow.handle_job), without the broker."""
    received = time.monotonic()
    spare = keeper.take(job)
    try:
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):
            if spare is not None and not spare.ready:  # only staged: the job warms it (jobflow)
                spare.warm([], by_job=True)
                spare.wait_ready(READY_WITHIN_S)
            result = execute.run(job, ctx, lambda: None, spare=spare, on_provisional=on_provisional,
                                 received=received)
    finally:
        keeper.release()
    return spare, result


def gone(pid: int) -> bool:
    return not procs.alive(pid)


def test_each_job_gets_a_fresh_spare_and_a_used_one_never_serves_again(keeper: SpareKeeper,
                                                                       ctx: execute.Context) -> None:
    first = ready_spare(keeper)
    used, result = run_job(keeper, ctx, make_job(1))
    assert used is first and result.outcome == "completed", result.message
    assert result.report is not None and result.report.status.value == "PASSED"
    assert result.report.sandbox["start"].startswith("a warm spare")
    assert gone(first.running.pid) and not first.scratch.path.exists()
    with pytest.raises(sandbox.SandboxError, match="served one already"):
        first.run(b"{}\n", time.monotonic() + 5, lambda: False, None)

    second = ready_spare(keeper)
    assert second is not first and second.running.pid != first.running.pid
    assert second.scratch.path != first.scratch.path
    used, result = run_job(
        keeper, ctx, make_job(2, source=(Path(__file__).parents[1] / "fixtures/good/wrong.py").read_text())
    )
    assert used is second and result.report is not None
    assert result.report.status.value == "INCORRECT_NUMERICAL" and result.report.sandbox["start"].startswith(
        "a warm"
    )
    assert keeper.started >= 2


def test_a_killed_spare_is_replaced(keeper: SpareKeeper) -> None:
    first = ready_spare(keeper)
    procs.kill_group(first.running.pid)
    eventually(lambda: keeper.spare() is not first, within_s=30, what="the dead spare dropped")
    assert not first.scratch.path.exists()
    second = ready_spare(keeper)
    assert second.running.pid != first.running.pid and keeper.started >= 2


def test_a_job_runs_fresh_when_the_slot_has_no_spare(ctx: execute.Context) -> None:
    result = execute.run(make_job(3), ctx, lambda: None)
    assert result.outcome == "completed", result.message
    assert result.report is not None and result.report.status.value == "PASSED"
    assert result.report.sandbox["start"] == "a fresh judge and child, started for this job"


def test_a_spare_whose_child_died_before_its_job_runs_nothing_and_the_job_runs_fresh(
        keeper: SpareKeeper, ctx: execute.Context) -> None:
    spare = ready_spare(keeper)
    job = make_job(4)
    taken = keeper.take(job)
    try:
        assert taken is spare
        child = next(pid for pid in procs.descendants(spare.running.pid)
                     if b"evaluator.harness.single.child" in Path(f"/proc/{pid}/cmdline").read_bytes())
        os.kill(child, signal.SIGKILL)  # the spare finds out before it runs anything of the job
        with ctx.state.gpu_locks(()):
            result = execute.run(job, ctx, lambda: None, spare=spare)
    finally:
        keeper.release()
    assert result.outcome == "completed", result.message
    assert result.report is not None and result.report.status.value == "PASSED"
    assert result.report.sandbox["start"] == "a fresh judge and child, started for this job"
    assert gone(spare.running.pid)


def test_a_job_whose_limits_differ_from_the_spares_runs_fresh(
    keeper: SpareKeeper, ctx: execute.Context
) -> None:
    spare = ready_spare(keeper)
    _, result = run_job(keeper, ctx, make_job(5, limits=JobLimits(processes=300)))
    assert result.report is not None and result.report.sandbox["start"].startswith("a fresh")
    assert gone(spare.running.pid) and not spare.scratch.path.exists()


def test_a_spare_stages_while_a_job_holds_the_slots_gpus_and_warms_only_after(ctx: execute.Context) -> None:
    keeper = SpareKeeper(ctx, spares=1)
    try:
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):  # a job (this slot's or another's) on the GPUs
            keeper.start()
            eventually(lambda: (spare := keeper.spare()) is not None and spare.staged, what="a staged spare")
            time.sleep(1.0)
            spare = keeper.spare()
            assert spare is not None and spare.staged and spare.warm_sent_at is None and not spare.ready
            staged_nice = {procs.niceness(pid) for pid in spare.tree()} - {None}
        warmed = ready_spare(keeper)
        assert warmed is spare and keeper.started == 1 and not warmed.warmed_by_job
        if ctx.users is not None:  # as root: staged at the lowest CPU priority, warmed at the job's
            assert 19 in staged_nice and {procs.niceness(pid) for pid in warmed.tree()} - {None} == {0}
    finally:
        keeper.stop()


def test_the_next_spare_stages_while_the_slot_is_busy_with_a_job_but_never_warms(
    ctx: execute.Context,
) -> None:
    keeper = SpareKeeper(ctx, spares=1, beside_jobs=True).start()  # as on a GPU
    try:
        staged_beside_a_job(keeper)
    finally:
        keeper.stop()


def staged_beside_a_job(keeper: SpareKeeper) -> None:
    first = ready_spare(keeper)
    spare = keeper.take(make_job(6))
    assert spare is first
    try:
        eventually(lambda: (nxt := keeper.spare()) is not None and nxt.staged, within_s=READY_WITHIN_S,
                   what="the next spare staged while the slot is busy")
        time.sleep(1.0)
        following = keeper.spare()
        assert following is not None and following is not first and keeper.started == 2
        assert following.warm_sent_at is None and not following.ready  # busy: no word to warm up
        assert (
            following.user is None
            or first.user is None
            or set(following.user.uids).isdisjoint(first.user.uids)
        )
    finally:
        spare.discard()
        keeper.release()
    assert ready_spare(keeper) is following  # idle again: the keeper warms it


def test_on_the_cpu_device_no_spare_starts_while_the_slot_is_busy(keeper: SpareKeeper) -> None:
    assert keeper.beside_jobs is False  # the CPU device's timed work is the host's own
    ready_spare(keeper)
    spare = keeper.take(make_job(11))
    assert spare is not None
    try:
        time.sleep(3)
        assert keeper.started == 1 and keeper.spare() is None
    finally:
        spare.discard()
        keeper.release()
    eventually(lambda: keeper.started == 2, within_s=30, what="a new spare once the slot is idle")


def test_a_job_that_takes_a_staged_spare_warms_it_under_its_own_locks(ctx: execute.Context) -> None:
    keeper = SpareKeeper(ctx, spares=1)
    try:
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):  # the keeper cannot warm it
            keeper.start()
            eventually(lambda: (spare := keeper.spare()) is not None and spare.staged, what="a staged spare")
        used, result = run_job(keeper, ctx, make_job(8))
    finally:
        keeper.stop()
    assert used is not None and used.warmed_by_job, "the keeper warmed it first: the test proves nothing"
    assert result.outcome == "completed" and result.report is not None, result.message
    assert result.report.status.value == "PASSED" and result.report.sandbox["start"].startswith(
        "a warm spare"
    )
    phases = result.report.phase_seconds
    assert phases["runner.spare_warmed_by_job"] == 1.0 and phases["runner.spare_warm"] > 0
    assert phases["spare.staged"] > 0 and phases["spare.device"] > 0 and "spare.child.warm_up.blas" in phases


def test_the_ended_job_warms_the_next_spare_and_keeps_the_locks_until_it_is_ready(
    ctx: execute.Context,
) -> None:
    keeper = SpareKeeper(ctx, spares=2, beside_jobs=True)
    try:
        keeper.start()
        first = ready_spare(keeper)
        eventually(lambda: len(keeper.spares()) == 2 and keeper.spares()[1].staged, what="two spares")
        taken = keeper.take(make_job(9))
        assert taken is first
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):
            result = execute.run(make_job(9), ctx, lambda: None, spare=taken)
            following = keeper.warm_next_after_job()
            assert following is not None and following.warming and not following.warmed_by_job
            assert ctx.state.try_gpu_locks(ctx.slot.gpu_indices) is None  # the job's locks cover its warm-up
            keeper.wait_warm(following, READY_WITHIN_S)
            assert following.ready
        keeper.release()
        assert result.outcome == "completed", result.message
        assert keeper.take(make_job(10)) is following
        keeper.release()
    finally:
        keeper.stop()


def test_a_job_stops_the_spare_another_slot_keeps_on_its_gpus(
    keeper: SpareKeeper, ctx: execute.Context
) -> None:
    spare = ready_spare(keeper)
    other = execute.Context(node="test", slot=Slot(key="x1", device="cpu", gpu_type="cpu", gpu_indices=(),
                                                   queue="gpu.cpu.x1"), state=ctx.state, users=ctx.users)
    assert stop_overlapping_spares(other) == ["cpu"]
    eventually(lambda: gone(spare.running.pid), within_s=10, what="the other slot's spare killed")
    eventually(lambda: keeper.spare() is not spare, within_s=30, what="the killed spare dropped")
    assert stop_overlapping_spares(ctx) == []  # a slot never stops its own


def test_a_ranked_job_sends_its_provisional_report_before_the_final_one(keeper: SpareKeeper,
                                                                       ctx: execute.Context) -> None:
    ready_spare(keeper)
    provisional: list[tuple[float, EvaluationReport]] = []
    _, result = run_job(keeper, ctx, make_job(7, mode="ranked"),
                        on_provisional=lambda report: provisional.append((time.monotonic(), report)))
    finished = time.monotonic()
    assert result.outcome == "completed" and result.report is not None, result.message
    assert len(provisional) == 1 and provisional[0][0] <= finished
    early = provisional[0][1]
    assert early.witnessed is False and early.rank_eligible is False and early.problem_score is None
    assert result.report.witnessed is True
    # The runner's clock, beside the judge's phases: receipt -> hand-over -> provisional -> final.
    phases = result.report.phase_seconds
    assert early.phase_seconds["runner.receipt_to_hand_over"] == phases["runner.receipt_to_hand_over"] >= 0
    assert 0 < early.phase_seconds["runner.hand_over_to_provisional"] <= phases["runner.hand_over_to_report"]
    assert phases["runner.hand_over_to_report"] <= phases["runner.hand_over_to_exit"]
    assert "runner.hand_over_to_exit" not in early.phase_seconds  # the process still ran then
    assert phases["judge_start"] < 1.0  # the spare imported everything before the job existed
