"""Issue 33, item 2: nothing per uid survives from one job into the next, and a job's memory and
processes are capped all together.

Real jailed runs (``sandbox.run``), as root with real namespaces, seccomp and cgroups where this
machine has them; what a test runs in the jail stands for a job's untrusted processes.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners import cgroups, identities, jobpolicy, procs, sandbox
from runners.identities import Rotation, UidBlock
from runners.slots import CPU_SLOT, Slot
from solboard_common.protocol import JobLimits
from tests.runner_helpers import traversable_folder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jail"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (job uids, cgroups)")
SECCOMP = pytest.mark.skipif(bool(sandbox.capabilities().seccomp_refused),
                             reason=f"no seccomp filter here: {sandbox.capabilities().seccomp_refused}")


@pytest.fixture
def folder() -> Iterator[Path]:
    path = traversable_folder()
    yield path
    os.system(f"rm -rf {path}")


def jailed(argv: list[str], root: Path, user: sandbox.JobUser | None, **limits: object) -> sandbox.Result:
    with sandbox.Scratch(root / "scratch", user) as scratch:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch.path), "LANG": "C.UTF-8"}
        spec = sandbox.Spec(argv=argv, env=env, user=user,
                            limits=sandbox.Limits(wall_seconds=60, **limits))  # type: ignore[arg-type]
        return sandbox.run(spec, scratch.path)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


@ROOT_ONLY
@SECCOMP
def test_a_key_left_in_a_keyring_by_one_job_is_not_read_by_the_next(
    folder: Path, user: sandbox.JobUser
) -> None:
    """The same uid twice (a pair comes back once its block has gone round): on main the second job
    read the first one's key back from the user, user-session and persistent keyrings."""
    plant = [sys.executable, str(FIXTURES / "keyring_plant.py")]
    first = jailed([*plant, "hunter2-from-job-1"], folder, user)
    second = jailed(plant, folder, user)
    out = first.stdout.decode() + second.stdout.decode()
    assert "planted" not in out and "found" not in out, out
    assert out.count("refused Operation not permitted") == 3, out
    assert "refused" in first.facts["keyrings"] and first.jail["session_keyring"] == "fresh"


SYSTEM_CALLS = """
import ctypes, errno, os, socket, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, number, *args):
    result = libc.syscall(number, *args)
    print(name, "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()])
call("ptrace", 101, 0, 0, 0, 0)              # PTRACE_TRACEME
call("bpf", 321, 0, 0, 0)
call("userfaultfd", 323, 0)
call("perf_event_open", 298, 0, 0, -1, -1, 0)
call("io_uring_setup", 425, 1, 0)
call("unshare", 272, 0x10000000)            # CLONE_NEWUSER
call("keyctl", 250, 0, -4, 0)
# What honest kernels do: threads, fork and exec, memory maps, sockets.
threading.Thread(target=lambda: None).start()
print("exec", subprocess.run(["true"]).returncode)
print("mmap", len(__import__("mmap").mmap(-1, 1 << 20)))
print("socket", socket.socketpair()[0].fileno() > 0)
"""


@SECCOMP
def test_the_seccomp_filter_refuses_what_no_kernel_needs_and_nothing_honest(
    folder: Path, user: object
) -> None:
    result = jailed(python(SYSTEM_CALLS), folder, user)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    seen = dict(line.split(" ", 1) for line in result.stdout.decode().splitlines())
    refused = ("ptrace", "bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "unshare", "keyctl")
    assert {name: seen[name] for name in refused} == dict.fromkeys(refused, "EPERM")
    assert (seen["exec"], seen["mmap"], seen["socket"]) == ("0", "1048576", "True")
    assert result.facts["seccomp"].startswith("libseccomp filter")


def test_each_job_gets_uids_no_running_process_holds() -> None:
    busy = {1_000_003}  # a pair whose untrusted uid still has a process (stuck in the driver, say)
    rotation = Rotation(UidBlock(1_000_000, 8), in_use=lambda uid: uid in busy)
    taken = [rotation.take() for _ in range(4)]
    assert [(user.uid, user.child_uid) for user in taken] == [
        (1_000_000, 1_000_001), (1_000_004, 1_000_005), (1_000_006, 1_000_007), (1_000_000, 1_000_001)]
    busy.update(range(1_000_000, 1_000_008))
    with pytest.raises(identities.NoUidBlock):
        rotation.take()


@ROOT_ONLY
def test_a_live_process_keeps_its_uids_out_of_the_rotation(folder: Path, uid_rotation: Rotation) -> None:
    user = uid_rotation.take()
    holder = os.fork()
    if holder == 0:
        os.setresuid(user.child_uid, user.child_uid, user.child_uid)  # type: ignore[arg-type]
        os.execv("/bin/sleep", ["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while not identities.uid_in_use(user.child_uid) and time.monotonic() < deadline:  # type: ignore[arg-type]
            time.sleep(0.01)  # the fork has not changed its uid yet
        assert identities.uid_in_use(user.child_uid)  # type: ignore[arg-type]
        for _ in range(uid_rotation.pairs):
            assert user.child_uid not in uid_rotation.take().uids
    finally:
        os.kill(holder, 9)
        os.waitpid(holder, 0)


def _group_or_skip() -> None:
    try:
        cgroups.create("probe", 64 << 20, 16).remove()
    except cgroups.CgroupUnavailable as error:
        pytest.skip(f"no cgroup here: {error}")


@ROOT_ONLY
def test_a_job_past_its_memory_cap_is_killed_and_reported(folder: Path, user: sandbox.JobUser) -> None:
    _group_or_skip()
    hog = python("""
    import mmap
    block = mmap.mmap(-1, 512 << 20)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    print("survived")
    """)
    result = jailed(hog, folder, user, memory_bytes=128 << 20, cgroup_processes=64)
    assert result.returncode != 0 and b"survived" not in result.stdout
    assert result.oom_kills >= 1
    assert result.facts["memory_cgroup"].startswith("cgroup v") and "128 MiB" in result.facts["memory_cgroup"]
    assert not [path for path in result.jail["cgroup"] if Path(path).parent.exists()]  # removed after the job


@ROOT_ONLY
def test_a_job_cannot_start_more_processes_than_its_cap(folder: Path, user: sandbox.JobUser) -> None:
    _group_or_skip()
    bomb = python("""
    import os, time
    started = 0
    try:
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            started += 1
    except OSError as error:
        print("refused", started, error.errno)
    """)
    result = jailed(bomb, folder, user, memory_bytes=1 << 30, cgroup_processes=40, processes=None)
    assert result.stdout.startswith(b"refused"), result.stdout
    assert int(result.stdout.split()[1]) < 40
    assert not procs.pids_with_uid(user.uid)


def test_the_runners_watch_ends_a_job_for_what_it_did_and_says_why(folder: Path, user: object) -> None:
    """The hook the GPU memory watch uses (NVML there; here the job's own word, a file it writes):
    the runner ends the job within about a second and the result says why, as its failure."""
    with sandbox.Scratch(folder / "scratch", user) as scratch:  # type: ignore[arg-type]
        flag = scratch.path / "too-much"
        spec = sandbox.Spec(
            argv=python(f"open({str(flag)!r}, 'w'); import time; time.sleep(60)"),
            env={"PATH": "/usr/bin:/bin", "HOME": str(scratch.path)},
            user=user,  # type: ignore[arg-type]
            limits=sandbox.Limits(wall_seconds=60),
            watch=lambda: "its processes held 9.0 GiB of GPU memory" if flag.exists() else None,
        )
        result = sandbox.run(spec, scratch.path)
    assert result.ended_for == "its processes held 9.0 GiB of GPU memory" and not result.timed_out
    assert result.wall_seconds < 10
    assert (
        jobpolicy.job_failure(result)
        == "the job was ended by the runner: its processes held 9.0 GiB of GPU memory"
    )


def test_the_gpu_memory_budget_is_the_jobs_or_a_share_of_the_gpus() -> None:
    slot = Slot(key="gpu0", device="cuda", gpu_type="h200", gpu_indices=(0,), queue="gpu.h200.x1")
    held = {"bytes": 7 << 30}
    watch = jobpolicy.gpu_memory_watch(
        JobLimits(gpu_memory_bytes=8 << 30), slot, used=lambda _: held["bytes"]
    )
    assert watch() is None
    held["bytes"] = 9 << 30
    assert (
        watch()
        == "its processes held 9.0 GiB of GPU memory, above the job's budget of 8.0 GiB; the job was ended"
    )
    assert jobpolicy.gpu_memory_watch(JobLimits(), CPU_SLOT)() is None  # the CPU device has no GPU memory
