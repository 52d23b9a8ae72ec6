"""``python -m evaluator serve-spare``: a job's processes started and warmed before the job exists,
on the CPU development device, as real processes.

It stages first (imports, no device call), warms its device only on the runner's word, then takes
one job; a line out of that order runs nothing.

A spare serves exactly one job and exits; one that gets no job within its idle limit, whose
child died, or whose stdin closed says ``not_ready`` and exits 75 having run nothing; a job in a
spare gets the same verdicts as a fresh process; ranked mode streams a provisional report
before the final one. (The runner's side: tests/runners/test_spares.py.)
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluator.commands.spare_cmd import WARM_WORD
from evaluator.jobstream import EXIT_NOT_READY
from tests.harness_helpers import CHEATS, GOOD, REPO, run_cli

EXAMPLE = REPO / "examples/python/vector_add.py"


class Spare:
    """One ``serve-spare`` process; its stdout read as the event stream it is."""

    def __init__(self, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "evaluator", "serve-spare", "--device", "cpu", *extra], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.events: list[dict[str, Any]] = []

    def next_event(self, timeout: float = 120) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline()
        assert line, f"the spare ended its output (exit {self.process.wait(timeout=30)}): {self.stderr()}"
        assert time.monotonic() < deadline
        event = json.loads(line)
        self.events.append(event)
        return event

    def staged(self) -> dict[str, Any]:
        event = self.next_event()
        assert event["event"] == "staged", event
        return event

    def ready(self) -> dict[str, Any]:
        """Staged, told to warm its device (the runner's word once no job runs there), ready."""
        self.staged()
        self.send(WARM_WORD, close=False)
        event = self.next_event()
        assert event["event"] == "ready", event
        return event

    def send(self, *lines: dict[str, Any], close: bool = True) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        self.process.stdin.flush()
        if close:
            self.process.stdin.close()

    def rest(self, timeout: float = 180) -> tuple[list[dict[str, Any]], int]:
        """Every further event and the exit status."""
        assert self.process.stdout is not None
        code = self.process.wait(timeout=timeout)
        events = [json.loads(line) for line in self.process.stdout.read().splitlines() if line.strip()]
        self.events += events
        return events, code

    def descendants(self) -> list[int]:
        found, frontier = [], [self.process.pid]
        while frontier:
            pid = frontier.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    children = [int(child) for child in (task / "children").read_text().split()]
                except OSError:
                    continue
                found += children
                frontier += children
        return found

    def child_pid(self) -> int:
        """The untrusted child (``evaluator.harness.single.child``) this spare warmed."""
        for pid in self.descendants():
            if b"evaluator.harness.single.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        raise AssertionError("the spare has no child")

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return (
            self.process.stderr.read().decode(errors="replace")[-3000:]
            if self.process.poll() is not None
            else ""
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def spare() -> Iterator[Spare]:
    started = Spare()
    yield started
    started.kill()


def job(path: Path, *extra: str, mode: str = "test", seed: int | None = 7) -> dict[str, Any]:
    run = ["vector_add", str(path), "--device", "cpu", "--mode", mode, "--shapes", "quick", *extra]
    return {"run": run, "secret_seed": seed}


def gone(pid: int, within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_spare_runs_exactly_one_job_and_exits(spare: Spare) -> None:
    ready = spare.ready()
    assert ready["device"] == "cpu" and ready["start_up_seconds"]["child.imports"] > 0
    child = spare.child_pid()
    spare.send(job(EXAMPLE), job(GOOD / "wrong.py"))  # a second job line is never read
    events, code = spare.rest()
    assert code == 0, spare.stderr()
    reports = [event["report"] for event in events if event["event"] == "report"]
    assert len(reports) == 1 and reports[0]["status"] == "PASSED"
    assert reports[0]["sandbox"]["start"].startswith("a warm spare")
    assert "spare_start_up.imports" in reports[0]["phase_seconds"]
    assert gone(child) and gone(spare.process.pid)


def test_a_spare_stages_without_its_device_and_warms_it_only_when_told(spare: Spare) -> None:
    staged = spare.staged()["start_up_seconds"]
    assert staged["child.imports"] > 0 and "child.stage" in staged and staged["judge.imports"] > 0
    assert not [
        name for name in staged if name.startswith(("child.warm_up", "child.device_init", "judge.blas"))
    ]
    time.sleep(1.0)  # it waits for the word: nothing comes meanwhile
    assert select.select([spare.process.stdout], [], [], 0)[0] == [] and spare.process.poll() is None
    spare.send(WARM_WORD, close=False)
    ready = spare.next_event()
    assert ready["event"] == "ready"
    warmed = ready["start_up_seconds"]
    assert warmed["child.warm_up"] > 0 and warmed["child.warm_up.blas"] >= 0 and warmed["judge.blas"] >= 0
    assert warmed["total"] == pytest.approx(warmed["staged"] + warmed["device"], abs=0.002)
    spare.send(job(EXAMPLE))
    events, code = spare.rest()
    assert code == 0 and [event["report"]["status"] for event in events] == ["PASSED"]


def test_a_job_line_before_the_word_to_warm_up_runs_nothing(spare: Spare) -> None:
    spare.staged()
    child = spare.child_pid()
    spare.send(job(EXAMPLE))
    events, code = spare.rest()
    assert code == EXIT_NOT_READY and [event["event"] for event in events] == ["not_ready"]
    assert "not the word to warm up" in events[0]["reason"] and gone(child)


def test_a_job_in_a_spare_gets_the_verdict_a_fresh_process_gives() -> None:
    for fixture, status in (
        (GOOD / "wrong.py", "INCORRECT_NUMERICAL"),
        (CHEATS / "c16_early_ready.py", "REJECTED"),
    ):
        fresh = run_cli("run", "vector_add", str(fixture), "--device", "cpu", "--shapes", "quick", "--json")
        assert json.loads(fresh.stdout)["status"] == status
        spare = Spare()
        try:
            spare.ready()
            spare.send(job(fixture))
            events, code = spare.rest()
        finally:
            spare.kill()
        assert code == 0 and [event["report"]["status"] for event in events] == [status], events


def test_ranked_mode_streams_a_provisional_report_before_the_witnessed_one(spare: Spare) -> None:
    spare.ready()
    spare.send(job(EXAMPLE, mode="ranked", seed=123456789))
    events, code = spare.rest()
    assert code == 0 and [event["event"] for event in events] == ["provisional", "report"]
    provisional, final = events[0]["report"], events[1]["report"]
    assert provisional["witnessed"] is False and provisional["rank_eligible"] is False
    assert any(note.startswith("provisional:") for note in provisional["notes"])
    assert all(shape["witness"] is None for shape in provisional["shapes"])
    assert final["witnessed"] is True and "witness" in final["phase_seconds"]
    assert [s["timing"]["median_us"] for s in provisional["shapes"]] == [
        s["timing"]["median_us"] for s in final["shapes"]
    ]


def test_a_test_job_streams_its_report_only() -> None:
    result = run_cli("run", "vector_add", str(EXAMPLE), "--device", "cpu", "--shapes", "quick", "--stream")
    assert result.returncode == 0, result.stderr[-2000:]
    assert [json.loads(line)["event"] for line in result.stdout.splitlines()] == ["report"]


def test_a_spare_that_gets_no_job_within_its_idle_limit_exits_not_ready() -> None:
    spare = Spare("--idle-limit", "2")
    try:
        spare.ready()
        child = spare.child_pid()
        event = spare.next_event()
        assert event["event"] == "not_ready" and "idle limit" in event["reason"]
        assert spare.process.wait(timeout=30) == EXIT_NOT_READY
        assert gone(child)
    finally:
        spare.kill()


def test_a_spare_whose_child_died_is_not_ready_and_takes_no_job(spare: Spare) -> None:
    spare.ready()
    os.kill(spare.child_pid(), signal.SIGKILL)
    event = spare.next_event(timeout=30)
    assert event["event"] == "not_ready" and (
        "child exited" in event["reason"] or "closed it" in event["reason"]
    )
    events, code = spare.rest()
    assert code == EXIT_NOT_READY and not [event for event in events if event["event"] == "report"]


def test_a_spare_whose_stdin_closes_without_a_job_exits_not_ready(spare: Spare) -> None:
    spare.ready()
    assert spare.process.stdin is not None
    spare.process.stdin.close()
    events, code = spare.rest()
    assert (
        code == EXIT_NOT_READY
        and events[0]["event"] == "not_ready"
        and "without a job" in events[0]["reason"]
    )


def test_a_malformed_job_line_runs_nothing(spare: Spare) -> None:
    spare.ready()
    spare.send({"run": "vector_add"})
    events, code = spare.rest()
    assert (
        code == EXIT_NOT_READY
        and events[0]["event"] == "not_ready"
        and "run arguments" in events[0]["reason"]
    )


FAKE_NCU = """#!{python}
import os, sys

# Stands for Nsight Compute: drops its options and runs its target as a child in a session of its
# own (so killing ncu's process group alone would not reach it).
target = sys.argv.index({python!r})
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execv(sys.argv[target], sys.argv[target:])
os.waitpid(pid, 0)
"""


def test_a_spares_witness_session_is_accepted_before_any_job_and_discarded_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a GPU spare does with its ncu session, with a stand-in for ncu: the witness process's
    connection is accepted at once (no submission exists yet), a test job discards the session
    and both ncu and the witness process die."""
    from evaluator.harness.witness.witnesses import NcuSession

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ncu").write_text(FAKE_NCU.format(python=sys.executable))
    (tools / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    session = NcuSession(tmp_path, profile=True)
    assert session.fits(True, False) and not session.fits(True, True) and not session.fits(False, False)
    session.launch()
    connection = session.start(120)
    assert session.start(1) is connection and session.witness_pid is not None and session.impostors == 0
    witness = session.witness_pid
    assert session.alive() and not gone(witness, within_s=0.5)
    session.discard()
    assert gone(session.process.pid, within_s=5) and gone(witness, within_s=5)

