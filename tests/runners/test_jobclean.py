"""After a job: its scratch folder goes, whatever the job left in it, and every process of it is
killed and reaped: its process group (a grandchild that left it included, through the job's marker)
and no process of anyone else's. Real processes and folders (not root: the uid sweep is the jail's,
tests/runners/test_jail.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from runners import procs
from runners.jobclean import Scratch, cleanup

SLEEPER = "import time; time.sleep(60)"
#: A job that starts a helper in a new session (out of its process group) and sleeps.
FORKS_OUT = (
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
    "start_new_session=True); time.sleep(60)"
)


def alive(pid: int) -> bool:
    return procs.state(pid) not in (None, "Z")


def wait_for(condition: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_the_scratch_folder_is_private_and_gone_after_the_job_with_read_only_leftovers(
    tmp_path: Path,
) -> None:
    with Scratch(tmp_path / "jobs", None) as scratch:
        assert stat.S_IMODE(scratch.path.stat().st_mode) == 0o700 and (scratch.path / "tmp").is_dir()
        assert stat.S_IMODE((tmp_path / "jobs").stat().st_mode) == 0o711  # no job lists another's
        locked = scratch.path / "tmp" / "locked"
        locked.mkdir()
        (locked / "result.bin").write_bytes(b"x" * 10)
        locked.chmod(0o500)  # what a job may leave: a folder its owner cannot write
        path = scratch.path
    assert not path.exists()


def test_cleanup_kills_and_reaps_the_jobs_process_group_and_no_other_process(tmp_path: Path) -> None:
    job = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        assert wait_for(lambda: procs.group_members(job.pid) == [job.pid])
        assert cleanup(job.pid, None, None) >= 1
        # Killed and reaped by cleanup itself (the runner is a subreaper): no zombie is left.
        assert wait_for(lambda: procs.state(job.pid) is None)
        assert alive(bystander.pid)
    finally:
        for process in (job, bystander):
            process.kill()
            process.wait()


def test_a_process_that_left_the_group_is_found_by_the_jobs_marker(tmp_path: Path) -> None:
    marker = f"test-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, procs.MARKER_VARIABLE: marker}
    job = subprocess.Popen([sys.executable, "-c", FORKS_OUT], start_new_session=True, env=env)
    try:
        assert wait_for(lambda: len(procs.marked(marker)) == 2)
        escaped = [pid for pid in procs.marked(marker) if pid != job.pid]
        cleanup(job.pid, None, marker)
        assert wait_for(lambda: procs.marked(marker) == [])
        assert wait_for(lambda: not any(alive(pid) for pid in escaped))
    finally:
        job.kill()
        job.wait()


def test_cleanup_of_a_group_already_gone_finds_nothing_to_kill() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpgrp())"],
        start_new_session=True,
        check=True,
        capture_output=True,
        text=True,
    )
    assert cleanup(int(finished.stdout), None, None) == 0
