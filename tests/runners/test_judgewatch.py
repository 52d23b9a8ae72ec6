"""The runner's watch over a running job from outside it: a judge stopped by a signal or a tracer
ends the job after STOPPED_GRACE_S (nothing of ours ever stops it), a judge that runs again is left
alone, and the job's own watch is asked once a second. Real processes, read through /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from runners import judgewatch
from runners.judgewatch import JudgeWatch, find_judge


@pytest.fixture
def judge() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def facts_of(pid: int) -> dict[str, object]:
    """The jail's facts of a job run in our own pid namespace (its init got our numbers)."""
    return {"init_pid": os.getpid(), "job_pid": pid, "namespaces": ["mount", "net"]}


def test_the_judge_is_the_job_pid_when_the_jail_shares_our_pid_namespace(
    judge: subprocess.Popen[bytes],
) -> None:
    assert find_judge(facts_of(judge.pid)) == judge.pid
    assert find_judge({"init_pid": "1", "job_pid": judge.pid}) is None  # facts not (yet) written
    assert find_judge({}) is None


def test_in_its_own_pid_namespace_the_judge_is_the_inits_child_with_that_inner_pid(
        judge: subprocess.Popen[bytes]) -> None:
    # Our own children stand for init's: their innermost pid is their pid here.
    assert find_judge({"init_pid": os.getpid(), "job_pid": judge.pid, "namespaces": ["pid"]}) == judge.pid
    assert find_judge({"init_pid": os.getpid(), "job_pid": 999_999_999, "namespaces": ["pid"]}) is None


def test_a_judge_stopped_past_the_grace_ends_the_job(judge: subprocess.Popen[bytes],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judgewatch, "STOPPED_GRACE_S", 0.2)
    watch = JudgeWatch(lambda: facts_of(judge.pid), lambda: None)
    assert watch.check() is None
    os.kill(judge.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while (why := watch.check()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert why is not None and "stopped by a signal" in why and "the job was ended" in why


def test_a_judge_that_runs_again_within_the_grace_is_left_alone(judge: subprocess.Popen[bytes],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judgewatch, "STOPPED_GRACE_S", 0.5)
    watch = JudgeWatch(lambda: facts_of(judge.pid), lambda: None)
    os.kill(judge.pid, signal.SIGSTOP)
    time.sleep(0.1)
    assert watch.check() is None and watch.stopped_since is not None
    os.kill(judge.pid, signal.SIGCONT)
    time.sleep(0.1)
    assert watch.check() is None and watch.stopped_since is None
    time.sleep(0.6)
    assert watch.check() is None


def test_the_jobs_own_watch_is_asked_once_a_second(judge: subprocess.Popen[bytes],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []

    def gpu_memory() -> str | None:
        asked.append(time.monotonic())
        return "the job's GPU memory passed its budget" if len(asked) > 1 else None

    monkeypatch.setattr(judgewatch, "WATCH_EVERY_S", 0.2)
    watch = JudgeWatch(lambda: facts_of(judge.pid), gpu_memory)
    assert watch.check() is None and asked == []  # not before its first period
    time.sleep(0.25)
    assert watch.check() is None and len(asked) == 1
    assert watch.check() is None and len(asked) == 1  # not again within the period
    time.sleep(0.25)
    assert watch.check() == "the job's GPU memory passed its budget"
