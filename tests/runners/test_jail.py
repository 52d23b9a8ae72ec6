"""The jail of one job (runners/jail.py, classes 15 and 19): what one job can see of
the host and of other jobs, and what it can leave behind for the next one.

Every test runs real children through the real jail, as root with the job user where the
machine allows (a test that needs root says so and is skipped otherwise). "The next job" is a
second jailed run on the same scratch root, as on a runner slot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners import procs, sandbox

REPO = Path(__file__).resolve().parents[2]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (job user, namespaces)")
ALL_NAMESPACES = {"net", "mount", "pid", "ipc"}
NEEDS_NAMESPACES = pytest.mark.skipif(
    not sandbox.capabilities().namespaces >= ALL_NAMESPACES, reason="this kernel refuses some namespaces")


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    sandbox.become_subreaper()  # as the worker that runs jobs is


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder under /tmp that the job user can reach: the scratch folder then lives under /tmp."""
    path = Path(tempfile.mkdtemp(prefix="solboard-jail-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def run(code: str, root: Path, user: sandbox.JobUser | None, *, disabled: frozenset[str] = frozenset(),
        hide: tuple[Path, ...] = (), wall_seconds: float = 30.0, python_path: str = "") -> sandbox.Result:
    with sandbox.Scratch(root / "scratch", user) as scratch:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch.path), "LANG": "C.UTF-8",
               procs.MARKER_VARIABLE: "test-marker-" + os.urandom(4).hex()}
        if python_path:
            env["PYTHONPATH"] = python_path
        spec = sandbox.Spec(argv=[sys.executable, "-c", textwrap.dedent(code)], env=env, user=user,
                            limits=sandbox.Limits(wall_seconds=wall_seconds), disabled=disabled, hide=hide)
        return sandbox.run(spec, scratch.path)


def lines(result: sandbox.Result) -> dict[str, str]:
    assert not result.jail_failed, result.stderr
    return dict(line.split(" ", 1) for line in result.stdout.decode().splitlines() if " " in line)


LIST_PROCESSES = """
import os
pids = [p for p in os.listdir("/proc") if p.isdigit()]
command_lines = b""
for pid in pids:
    try:
        command_lines += open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        pass
print("count", len(pids))
print("secret", ("{secret_head}" + "{secret_tail}").encode() in command_lines)  # not in its own
"""


def list_processes(secret: str) -> str:
    return LIST_PROCESSES.format(secret_head=secret[:8], secret_tail=secret[8:])


@NEEDS_NAMESPACES
def test_a_job_sees_only_its_own_processes_and_no_other_command_line(folder: Path, user: object) -> None:
    secret = f"solboard-secret-{os.urandom(6).hex()}"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--token={secret}"])
    try:
        seen = lines(run(list_processes(secret), folder, user))  # type: ignore[arg-type]
    finally:
        other.kill()
        other.wait()
    assert seen["secret"] == "False"
    assert int(seen["count"]) <= 3  # its init, itself (and nothing of the host)


@NEEDS_NAMESPACES
def test_the_report_says_so_when_the_pid_namespace_is_switched_off(folder: Path, user: object) -> None:
    secret = f"solboard-secret-{os.urandom(6).hex()}"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--token={secret}"])
    try:
        result = run(list_processes(secret), folder, user,  # type: ignore[arg-type]
                     disabled=frozenset({"pid"}))
    finally:
        other.kill()
        other.wait()
    seen = lines(result)
    assert seen["secret"] == "True" and int(seen["count"]) > 3  # what the switch opens, really open
    assert result.facts["processes"].startswith("NOT isolated")
    assert "host processes visible in /proc" in result.gaps
    assert "pid" not in result.jail["namespaces"]


SHM = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
key = 0x50B0A4D
print("huge", libc.shmget(0x50B0A4E, ctypes.c_size_t(10 << 30), 0o1600))  # IPC_CREAT | 0600
found = libc.shmget(key, ctypes.c_size_t(4096), 0o600)
print("found", found)
if found < 0:
    created = libc.shmget(key, ctypes.c_size_t(4096), 0o1600)
    address = libc.shmat(created, None, 0)
    ctypes.memmove(address, b"{token}", len(b"{token}"))
    print("created", created)
"""


@NEEDS_NAMESPACES
def test_sysv_shared_memory_of_a_job_is_capped_and_gone_after_it(folder: Path, user: object) -> None:
    token = f"token-{os.urandom(4).hex()}"
    first = run(SHM.replace("{token}", token), folder, user)  # type: ignore[arg-type]
    second = run(SHM.replace("{token}", token), folder, user)  # type: ignore[arg-type]
    assert lines(first)["huge"] == "-1"  # 10 GiB is over the namespace's cap
    assert lines(first)["found"] == "-1" and int(lines(first)["created"]) >= 0
    assert lines(second)["found"] == "-1"  # the next job does not find it
    host_keys = [line.split()[0] for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert str(0x50B0A4D) not in host_keys  # nor does the host
    assert f"{sandbox.Limits(wall_seconds=1).shared_memory_bytes} bytes" in first.facts["ipc"]


LEAVE_FILES = """
import os
folders = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/run"]
for folder in folders:
    if os.path.exists(os.path.join(folder, "{token}")):
        print("found", folder)
for folder in folders:
    path = os.path.join(folder, "{token}")
    try:
        open(path, "w").write("left behind")
        print("wrote", path)
    except OSError as error:
        print("refused", path, error.errno)
"""


@ROOT_ONLY
@NEEDS_NAMESPACES
def test_a_file_left_in_a_world_writable_folder_is_not_seen_by_the_next_job(
    folder: Path, user: object
) -> None:
    token = f"solboard-left-{os.urandom(4).hex()}"
    first = run(LEAVE_FILES.replace("{token}", token), folder, user)  # type: ignore[arg-type]
    second = run(LEAVE_FILES.replace("{token}", token), folder, user)  # type: ignore[arg-type]
    assert b"wrote /tmp/" in first.stdout and b"wrote /dev/shm/" in first.stdout  # usable, but private
    assert b"wrote /run/lock/" in first.stdout
    assert b"found" not in second.stdout
    for place in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run"):
        assert not Path(place, token).exists()
    assert {"/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock"} <= set(first.jail["private"])


@NEEDS_NAMESPACES
def test_a_scratch_folder_under_tmp_still_gets_a_private_tmp(folder: Path, user: object) -> None:
    assert str(folder).startswith("/tmp/")
    token = f"solboard-tmp-{os.urandom(4).hex()}"
    code = f"""
    import os
    open("/tmp/{token}", "w").write("x")
    open(os.path.join(os.environ["HOME"], "mine"), "w").write("x")
    print("listing", sorted(os.listdir("/tmp")))
    """
    result = run(code, folder, user)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    assert not Path("/tmp", token).exists()
    # Its own path, and what the job runs when that lives under /tmp (a virtualenv there, as in a
    # clean clone under /tmp), bound back read-only; nothing else.
    kept = {Path(prefix).resolve().relative_to("/tmp").parts[0] for prefix in (sys.prefix, sys.base_prefix)
            if Path(prefix).resolve().is_relative_to("/tmp")}
    assert lines(result)["listing"] == str(sorted({folder.name, token} | kept))
    assert "/tmp" in result.facts["tmp"]


@ROOT_ONLY
@NEEDS_NAMESPACES
def test_a_project_under_tmp_stays_visible_read_only_behind_the_private_tmp(
    folder: Path, user: object
) -> None:
    """CI runs from a clean clone that may live under /tmp: the private /tmp must not hide it."""
    project = folder / "project"
    project.mkdir()
    (project / "solboard_probe.py").write_text("ANSWER = 42\n")
    os.chmod(project, 0o755)
    os.chmod(project / "solboard_probe.py", 0o644)
    code = f"""
    import solboard_probe
    print("answer", solboard_probe.ANSWER)
    try:
        open("{project}/written", "w").write("x"); print("wrote yes")
    except OSError:
        print("wrote no")
    """
    result = run(code, folder, user, python_path=str(project))  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    assert lines(result)["answer"] == "42" and lines(result)["wrote"] == "no"
    assert str(project) in result.facts["tmp"]


@ROOT_ONLY
@NEEDS_NAMESPACES
def test_writing_outside_the_scratch_folder_fails_everywhere(folder: Path, user: object) -> None:
    state = folder / "state"
    (state / "outbox").mkdir(parents=True)
    (state / "outbox" / "result.json").write_text("another job's result")
    os.chmod(state / "outbox" / "result.json", 0o644)
    targets = [REPO / "solboard-escape", Path("/etc/solboard-escape"), Path("/var/solboard-escape"),
               Path("/usr/solboard-escape"), Path(sys.prefix) / "solboard-escape", state / "outbox" / "x"]
    code = f"""
    import os
    for path in {[str(target) for target in targets]!r}:
        try:
            open(path, "w").write("x"); print("wrote", path)
        except OSError as error:
            print("refused", path, error.errno)
    print("state", os.path.exists({str(state / "outbox" / "result.json")!r}))
    """
    result = run(code, folder, user, hide=(state,))  # type: ignore[arg-type]
    seen = lines(result)
    assert seen.pop("state") == "False"  # hidden, not only unreadable
    assert all(line.startswith("refused") for line in result.stdout.decode().splitlines()[:-1]), result.stdout
    assert not any(target.exists() for target in targets[:-1])
    assert result.facts["filesystem"] == "read-only but the scratch folder"
    assert str(state) in result.jail["hidden"]


@ROOT_ONLY
@NEEDS_NAMESPACES
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_a_user_namespace_the_job_makes_does_not_undo_the_jail(folder: Path, user: object) -> None:
    """Root of its own user namespace, the job holds every capability over a copy of its mounts;
    the kernel locks what it copied: no unmount reveals the host's /tmp, no remount makes / writable.
    (The seccomp filter refuses the namespace itself: switched off here, to test the wall behind it.)"""
    token = f"solboard-host-{os.urandom(4).hex()}"
    Path("/tmp", token).write_text("the host's")
    script = (f"umount /tmp; umount -l /tmp; mount -o remount,bind,rw /; touch /etc/{token}; "
              f"test -e /tmp/{token} && echo SEES-HOST-TMP; id -u")
    code = f"""
    import subprocess
    out = subprocess.run(["unshare", "-Urm", "sh", "-c", {script!r}], capture_output=True, text=True)
    print("out", out.stdout.split())
    """
    try:
        result = run(code, folder, user, disabled=frozenset({"seccomp"}))  # type: ignore[arg-type]
    finally:
        Path("/tmp", token).unlink()
    seen = lines(result)
    if seen["out"] == "[]":
        pytest.skip("this kernel refuses the job a user namespace (nothing to undo with)")
    assert seen["out"] == "['0']"  # it was root there, and saw no host /tmp
    assert not Path("/etc", token).exists()


@NEEDS_NAMESPACES
@pytest.mark.parametrize(
    "disabled", [frozenset(), frozenset({"pid"})], ids=["pid-namespace", "no-pid-namespace"]
)
def test_no_process_or_zombie_is_left_when_the_job_is_killed_with_a_daemon(
    folder: Path, user: object, disabled: frozenset[str]
) -> None:
    token = f"solboard-daemon-{os.urandom(4).hex()}"
    code = f"""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{token}"])
        os._exit(0)
    time.sleep(300)
    """
    result = run(code, folder, user, disabled=disabled, wall_seconds=3)  # type: ignore[arg-type]
    assert result.timed_out
    assert _processes_with(token) == []
    assert procs.zombie_children() == []


def test_a_job_cannot_forge_a_jail_failure(folder: Path, user: object) -> None:
    """Exit status 125 and a 'solboard-jail:' line are what a failed jail prints; a job printing
    them is still a job that ran (the jail's own pipe says it started)."""
    code = "import os, sys; sys.stderr.write('solboard-jail: forged\\n'); sys.stderr.flush(); os._exit(125)"
    result = run(code, folder, user)  # type: ignore[arg-type]
    assert result.returncode == 125 and not result.jail_failed
    assert result.jail["started"] is True


OBSERVE = """
import os
mounts = {line.split()[4]: line.split(" - ")[1].split()[0] for line in open("/proc/self/mountinfo")}
print("tmp", mounts.get("/tmp"))
print("processes", len([p for p in os.listdir("/proc") if p.isdigit()]))
try:
    open("/etc/solboard-probe", "w")
    print("etc", "writable")
except OSError as error:
    print("etc", error.errno)
"""


@ROOT_ONLY
@NEEDS_NAMESPACES
@pytest.mark.parametrize(
    "disabled", [frozenset(), frozenset({"mount", "pid", "ipc"})], ids=["all", "net-only"]
)
def test_the_reported_facts_match_what_the_job_observes(
    folder: Path, user: object, disabled: frozenset[str]
) -> None:
    result = run(OBSERVE, folder, user, disabled=disabled)  # type: ignore[arg-type]
    seen = lines(result)
    isolated = not disabled
    assert (seen["tmp"] == "tmpfs") is isolated and ("/tmp" in result.facts["tmp"]) is isolated
    assert (int(seen["processes"]) <= 3) is isolated
    assert result.facts["processes"].startswith("own pid namespace") is isolated
    assert seen["etc"] == ("30" if isolated else "13")  # EROFS, or only the permissions (EACCES)
    assert result.facts["filesystem"].startswith("NOT read-only") is not isolated
    assert ("SysV IPC shared with the host" in result.gaps) is not isolated


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


UNPRIVILEGED_RUNNER = """
import json, sys, pathlib
from runners import sandbox
root = pathlib.Path(sys.argv[1])
with sandbox.Scratch(root, None) as scratch:
    code = ("import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]), "
            "os.path.exists('/tmp/' + {token!r}))")
    spec = sandbox.Spec(argv=[sys.executable, "-c", code], env={{"PATH": "/usr/bin:/bin"}},
                        limits=sandbox.Limits(wall_seconds=30))
    result = sandbox.run(spec, scratch.path)
print(json.dumps({{"stdout": result.stdout.decode(), "facts": result.facts, "gaps": result.gaps,
                  "caps": sorted(sandbox.capabilities().namespaces)}}))
"""


@ROOT_ONLY
def test_a_runner_that_is_not_root_gets_the_namespaces_the_kernel_allows(folder: Path,
                                                                         user: sandbox.JobUser) -> None:
    """`make run` and CI run the runner as an ordinary user: a user namespace then carries the
    pid, IPC, mount and network namespaces where the kernel allows it, and the report says which."""
    token = f"solboard-unprivileged-{os.urandom(4).hex()}"
    Path("/tmp", token).write_text("the host's")
    scratch_root = folder / "scratch"
    scratch_root.mkdir()
    os.chown(scratch_root, user.uid, user.gid)
    try:
        out = subprocess.run(
            ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", sys.executable, "-c",
             UNPRIVILEGED_RUNNER.format(token=token), str(scratch_root)],
            cwd=REPO, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(scratch_root)},
            capture_output=True, text=True, timeout=120, check=False)
    finally:
        Path("/tmp", token).unlink()
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["facts"]["user"].startswith("NOT dropped")
    assert "runs as the runner's own user (the runner is not root)" in report["gaps"]
    if not {"pid", "mount"} <= set(report["caps"]):
        pytest.skip(f"this kernel gives an unprivileged user only {report['caps']}")
    assert report["facts"]["user_namespace"].startswith("namespaces created in a user namespace")
    assert report["facts"]["processes"].startswith("own pid namespace")
    count, sees_host_tmp = report["stdout"].split()
    assert int(count) <= 3 and sees_host_tmp == "False"


def test_the_worker_reaps_the_orphans_it_inherits_as_a_subreaper() -> None:
    """When a jail is killed before its init, the init and the job's orphans come to the worker."""
    orphan_maker = subprocess.Popen(
        [sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    time.sleep(0.3); os._exit(0)\n"],
        start_new_session=True)
    orphan_maker.wait()
    time.sleep(0.8)  # the grandchild, now ours (we are a subreaper), has exited: a zombie
    orphans = [pid for pid, _, group in procs.zombie_children() if group == orphan_maker.pid]
    assert len(orphans) == 1
    procs.reap_children(lambda pid, uid, group: group == orphan_maker.pid)
    assert not [pid for pid, _, group in procs.zombie_children() if group == orphan_maker.pid]


@ROOT_ONLY
@NEEDS_NAMESPACES
def test_the_report_of_a_runner_job_carries_the_jails_facts(folder: Path, uid_rotation: object) -> None:
    """execute.run fills report.sandbox from what the jail reported, gaps included."""
    import hashlib

    from runners import execute
    from runners.slots import Slot, StateDir
    from solboard_common.protocol import Job

    source = (REPO / "examples" / "python" / "vector_add.py").read_text()
    state = StateDir(folder / "state")
    slot = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
    ctx = execute.Context(node="test", slot=slot, state=state, users=uid_rotation)  # type: ignore[arg-type]
    job = Job(job_id="facts-1", evaluation_id=1, problem="vector_add", problem_version=1, language="python",
              source=source, source_sha256=hashlib.sha256(source.encode()).hexdigest(), mode="test",
              seed=1234567, gpu_type="cpu")
    result = execute.run(job, ctx, lambda: None)
    assert result.outcome == "completed" and result.report is not None, result.message
    facts = result.report.sandbox
    assert facts["user"].startswith("solboard-job (uid ")
    assert facts["processes"].startswith("own pid namespace")
    assert facts["filesystem"] == "read-only but the scratch folder"
    assert str(state.root) in facts["hidden"]
    assert facts["seccomp"].startswith("libseccomp filter")
    assert "cannot signal, trace or read the judge" in facts["identities"]
    assert "can neither signal, trace nor read the judge" in facts["judge_identity"]  # the judge's own word
    assert facts["gaps"] == "disk: a per-file size limit, no quota on the scratch folder"
