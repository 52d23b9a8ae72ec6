"""The job sandbox (runners/sandbox.py, class 15), with small Python payloads.

Each test runs a real child through the real jail. Isolation that needs root (a dedicated user,
network and mount namespaces) is skipped, with the reason, on a machine that does not allow it.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runners import procs, sandbox

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (job user, namespaces)")


@pytest.fixture
def scratch_root(tmp_path: Path) -> Path:
    os.chmod(tmp_path, 0o755)  # the job user must be able to reach its scratch folder
    return tmp_path / "scratch"


def run(
    code: str, root: Path, user: sandbox.JobUser | None, stdin: bytes = b"", **limits: object
) -> sandbox.Result:
    with sandbox.Scratch(root, user) as scratch:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch.path), "LANG": "C.UTF-8",
               procs.MARKER_VARIABLE: "test-marker-" + os.urandom(4).hex()}
        spec = sandbox.Spec(
            argv=[sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            stdin=stdin,
            user=user,
            limits=sandbox.Limits(**{"wall_seconds": 30.0, **limits}),
        )  # type: ignore[arg-type]
        return sandbox.run(spec, scratch.path)


def test_the_job_sees_only_the_environment_it_is_given(scratch_root: Path, user: object,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOLBOARD_PLANTED_SECRET", "hunter2")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://secret-broker:6379/0")
    result = run("import os; print(sorted(os.environ)); print(dict(os.environ))", scratch_root, user)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    assert b"hunter2" not in result.stdout and b"secret-broker" not in result.stdout
    assert b"SOLBOARD_PLANTED_SECRET" not in result.stdout and b"CELERY_BROKER_URL" not in result.stdout


def test_the_secret_seed_arrives_on_stdin_and_nowhere_else(scratch_root: Path, user: object) -> None:
    code = "import os, sys; print(sys.stdin.readline().strip()); print('9876' in str(os.environ), sys.argv)"
    result = run(code, scratch_root, user, stdin=b"9876\n")  # type: ignore[arg-type]
    assert result.stdout.split(b"\n")[:2] == [b"9876", b"False ['-c']"]


@ROOT_ONLY
def test_the_job_runs_as_the_unprivileged_job_user(scratch_root: Path, user: sandbox.JobUser) -> None:
    result = run("import os; print(os.getuid(), os.getgid(), os.getgroups())", scratch_root, user)
    assert result.stdout.decode().split(None, 2)[:2] == [str(user.uid), str(user.gid)]
    assert result.facts["user"] == user.name




@ROOT_ONLY
def test_the_network_is_unreachable_from_the_job(scratch_root: Path, user: sandbox.JobUser,
                                                  listener: tuple[int, list[object]]) -> None:
    port, accepted = listener
    code = f"""
    import socket
    for address in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
        s = socket.socket(); s.settimeout(3)
        print(address[0], s.connect_ex(address))
    """
    result = run(code, scratch_root, user)
    lines = dict(line.split() for line in result.stdout.decode().splitlines())
    assert lines["127.0.0.1"] != "0" and lines["1.1.1.1"] != "0"
    assert accepted == []
    assert result.facts["network"].startswith("namespace")


@ROOT_ONLY
def test_writes_outside_the_scratch_folder_are_refused_or_vanish(scratch_root: Path, user: sandbox.JobUser,
                                                                  tmp_path: Path) -> None:
    protected = tmp_path / "protected"
    protected.mkdir(mode=0o755)
    marker = f"solboard-escape-{os.getpid()}"
    code = f"""
    import os
    for path in ["{protected}/owned", "/var/tmp/{marker}", "/dev/shm/{marker}", os.path.expanduser("~/ok")]:
        try:
            open(path, "w").write("x"); print("wrote", path)
        except OSError as error:
            print("refused", path, error.errno)
    """
    result = run(code, scratch_root, user)
    assert b"refused " + str(protected).encode() in result.stdout
    assert not (protected / "owned").exists()
    # Private tmpfs (/tmp too, unless the scratch folder lives under /tmp as pytest's does here).
    assert not Path(f"/var/tmp/{marker}").exists() and not Path(f"/dev/shm/{marker}").exists()
    assert b"wrote " in result.stdout  # its own HOME (the scratch folder) is writable


def _processes_with(token: str) -> list[int]:
    """Host pids whose command line holds ``token`` (a pid printed inside a pid namespace is not one)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_process_that_leaves_the_group_is_killed_after_the_job(scratch_root: Path, user: object) -> None:
    token = f"solboard-daemon-{os.urandom(4).hex()}"
    code = f"""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{token}"])
        os._exit(0)
    time.sleep(0.5)
    """
    result = run(code, scratch_root, user)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    assert result.leftovers_killed >= 1
    assert _processes_with(token) == []
    assert procs.zombie_children() == []


def test_the_wall_limit_kills_the_whole_process_group(scratch_root: Path, user: object) -> None:
    code = """
    import os, time
    if os.fork() == 0:
        time.sleep(300)
    print(os.getpid(), flush=True); time.sleep(300)
    """
    started = time.monotonic()
    result = run(code, scratch_root, user, wall_seconds=2.0)  # type: ignore[arg-type]
    assert result.timed_out and not result.cancelled
    assert time.monotonic() - started < 15
    assert not procs.group_members(int(result.stdout.split()[0]))


def test_a_cancel_request_stops_the_job(scratch_root: Path, user: sandbox.JobUser | None) -> None:
    requested_at = time.monotonic() + 1.0
    with sandbox.Scratch(scratch_root, user) as scratch:
        spec = sandbox.Spec(
            argv=[sys.executable, "-c", "import time; time.sleep(300)"],
            env={"PATH": "/usr/bin"},
            limits=sandbox.Limits(wall_seconds=60),
            user=user,
            cancel_requested=lambda: time.monotonic() > requested_at,
        )
        result = sandbox.run(spec, scratch.path)
    assert result.cancelled and not result.timed_out and result.wall_seconds < 10


def test_every_line_reaches_the_line_handler_even_when_the_process_exits_right_after(
        scratch_root: Path, user: object) -> None:
    """A judge leaves by os._exit the moment its final report is out (evaluator/jobstream.py): the
    provisional line just before it must still reach the runner's handler, not only the stdout."""
    code = "import os; os.write(1, b'one\\ntwo\\nthree\\n'); os._exit(0)"
    seen: list[bytes] = []
    with sandbox.Scratch(scratch_root, user) as scratch:  # type: ignore[arg-type]
        spec = sandbox.Spec(argv=[sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin"},
                            limits=sandbox.Limits(wall_seconds=30), user=user)  # type: ignore[arg-type]
        running = sandbox.start(spec, scratch.path)
        result = running.wait(time.monotonic() + 30, lambda: False, seen.append)
    assert result.returncode == 0 and result.stdout == b"one\ntwo\nthree\n"
    assert seen == [b"one", b"two", b"three"]


def test_output_is_captured_and_capped(scratch_root: Path, user: object) -> None:
    code = "import sys; sys.stdout.write('x' * 1_000_000); sys.stderr.write('y' * 1_000_000)"
    result = run(code, scratch_root, user, stdout_bytes=65536, stderr_bytes=1024)  # type: ignore[arg-type]
    assert result.returncode == 0
    assert len(result.stdout) == 65536 and result.stdout_truncated
    assert len(result.stderr) == 1024 and result.stderr_truncated


def test_a_file_larger_than_the_limit_cannot_be_written(scratch_root: Path, user: object) -> None:
    code = """
    try:
        open("big", "wb").write(b"0" * 4_000_000); print("wrote")
    except OSError as error:
        print("refused", error.errno)
    """
    result = run(code, scratch_root, user, file_bytes=1_000_000)  # type: ignore[arg-type]
    assert result.stdout.startswith(b"refused 27")  # EFBIG


def test_the_scratch_folder_is_deleted_afterwards(scratch_root: Path, user: object) -> None:
    result = run("import os; os.makedirs('a/b'); open('a/b/c', 'w').write('x'); os.chmod('a', 0o500)",
                 scratch_root, user)  # type: ignore[arg-type]
    assert result.returncode == 0
    assert list(scratch_root.iterdir()) == []


def test_a_jail_that_cannot_start_is_reported_as_such(scratch_root: Path, user: object) -> None:
    result = run("print('never')", scratch_root, user, processes=-5)  # type: ignore[arg-type]
    assert result.jail_failed and b"never" not in result.stdout


def test_the_job_reads_a_copy_of_the_calibration_the_runner_keeps_root_only(uid_rotation: object) -> None:
    """The calibration cache lives in the state folder (0700, the runner's); the job user gets a copy.

    Found on the H200: the evaluator, run as the job user, was handed the cache's own path and
    stopped with 'Permission denied' before evaluating anything."""
    from runners import execute
    from runners.slots import Slot, StateDir
    from tests.runner_helpers import make_job, traversable_folder

    folder = traversable_folder()  # the job user must reach its scratch folder
    state = StateDir(folder / "state")
    cache = state.root / "calibration" / "h200-driver-580.json"
    cache.write_text('{"ceilings": {"hbm_tbps": 4.2, "bf16_tensor_tflops": 760.0}}')
    slot = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
    ctx = execute.Context(node="test", slot=slot, state=state, users=uid_rotation, calibration=cache)  # type: ignore[arg-type]
    try:
        result = execute.run(make_job(1, mode="test"), ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert result.outcome == "completed", result.message
    assert result.report is not None and result.report.status.value == "PASSED"


def test_the_job_finds_the_cuda_tools_the_runner_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ncu, ptxas, nvcc, cuobjdump and nvdisasm often live outside the system folders (a CUDA
    toolkit, a wheel's bin folder): the job's PATH names where the runner found them."""
    from runners import execute

    tools = tmp_path / "cuda" / "bin"
    tools.mkdir(parents=True)
    ncu = tools / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    folders = execute.job_path().split(":")
    assert str(tools) in folders
    assert folders[0] == str(Path(sys.executable).parent)
    assert len(folders) == len(set(folders))


@pytest.mark.gpu
@pytest.mark.skipif(
    shutil.which("ncu") is None or shutil.which("nvidia-smi") is None, reason="needs a GPU and ncu"
)
def test_a_ranked_gpu_job_in_the_sandbox_gets_its_ncu_profile(uid_rotation: object) -> None:
    """On the GPU, as the job user: the calibration copy, the CUDA tools on the PATH, the profile."""
    import hashlib

    from runners import execute
    from runners.slots import Slot, StateDir
    from solboard_common.protocol import Job
    from tests.runner_helpers import EXAMPLE_VECTOR_ADD, traversable_folder

    folder = traversable_folder()
    state = StateDir(folder / "state")
    cache = state.root / "calibration" / "h200.json"
    cache.write_text('{"ceilings": {"hbm_tbps": 4.2, "bf16_tensor_tflops": 760.0}}')
    slot = Slot(key="gpu0", device="cuda", gpu_type="h200", gpu_indices=(0,), queue="gpu.h200.x1")
    ctx = execute.Context(node="test", slot=slot, state=state, users=uid_rotation, calibration=cache)  # type: ignore[arg-type]
    job = Job(
        job_id="profile-1",
        evaluation_id=1,
        problem="vector_add",
        problem_version=1,
        language="python",
        source=EXAMPLE_VECTOR_ADD,
        source_sha256=hashlib.sha256(EXAMPLE_VECTOR_ADD.encode()).hexdigest(),
        mode="ranked",
        seed=987654321,
        shapes="quick",
        gpu_type="h200",
    )
    try:
        result = execute.run(job, ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert result.outcome == "completed", result.message
    report = result.report
    assert report is not None and report.status.value == "PASSED", report
    for shape in report.shapes:
        assert shape.profile is not None
        print(shape.shape_id, shape.profile.available, shape.profile.reason,
              [(k.name[:40], k.duration_us) for k in shape.profile.kernels])
    assert all(shape.profile and shape.profile.available for shape in report.shapes), [
        shape.profile.reason for shape in report.shapes if shape.profile]
