"""The jail of one job: namespaces, a read-only file system, a reaping init, then the job.

Run as a script with the interpreter isolated (``python -I -S runners/jail.py CONFIG -- ARGV``):
it imports nothing from the project or site-packages. Three processes, each single-threaded:

    runner ── outer ── init (PID 1 of the job's pid namespace) ── job (execve of ARGV)

1. outer: joins the job's cgroup (made by the runner), unshares the requested namespaces (network, mount, pid,
   IPC; plus a user namespace mapping the runner's own uid when the runner is not root), brings loopback up,
   forks init, waits for it and exits with its status. A new pid namespace only applies to children, hence the
   fork.
2. init: builds the job's view of the file system (``jail_view.build_view``), caps SysV shared memory, joins a
   fresh session keyring, forks the job, writes the facts of what it did to the runner's facts pipe, then
   reaps every process until the job exits and kills whatever the job left (as PID 1, its exit would kill them
   anyway). It is a subreaper too, for when there is no pid namespace.
3. job: resource limits, the job's uids (``jail_ids``: the judge's, with the untrusted processes' uid to take
   as its effective one), no new privileges, the seccomp filter (``jail_filter``), parent-death signal, umask,
   ``execve``. A failure here goes back to init on a close-on-exec pipe, so "the job started" is a fact the
   job itself cannot forge.

Why a trampoline rather than ``preexec_fn``: Popen's ``user=`` drops privileges *before*
``preexec_fn`` runs (so unshare would fail), and ``preexec_fn`` is unsafe in a threaded parent.
A failure before the job starts exits with status 125 and a line starting with ``solboard-jail:``.

Facts (JSON lines on ``facts_fd``, merged by the runner): ``namespaces`` that applied,
``user_namespace``, ``proc``, ``read_only`` / ``read_only_failed``, ``private`` (tmpfs masks),
``hidden``, ``users_named``, ``shm_limit_bytes``, ``session_keyring``, ``child_uid``, ``seccomp``,
``cgroup``, ``started`` / ``error`` / ``job_pid``, then ``job_exit`` and ``leftovers_killed``.

Two other modes: ``--probe`` prints what this kernel allows (JSON); ``--kill-uid UID`` becomes
UID and sends SIGKILL to every process of that user (``kill(-1)``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import struct
import sys
import time
from typing import Any

# The jail runs isolated (-I -S): its helpers are found beside it, never on a path the job controls.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jail_filter
import jail_ids
from jail_view import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_REC, JailError, build_view, check, mount

EXIT_JAIL_FAILED = 125
NAMESPACES = {"net": 0x40000000, "mount": 0x00020000, "pid": 0x20000000, "ipc": 0x08000000}
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38

_libc = ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> None:
    check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def prctl(option: int, value: int) -> None:
    check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def loopback_up() -> None:
    """A new network namespace starts with ``lo`` down; local IPC (NCCL, torch.distributed) wants it."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces(names: list[str], user_namespace: bool) -> None:
    """Unshare ``names``; without root, inside a user namespace that maps only our own ids (so the
    job, after execve, holds no capability there)."""
    flags = sum(NAMESPACES[name] for name in names)
    if user_namespace:
        uid, gid = os.getuid(), os.getgid()
        unshare(flags | CLONE_NEWUSER)
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    elif flags:
        unshare(flags)
    if "net" in names:
        loopback_up()


def cap_shared_memory(limit_bytes: int) -> int | None:
    """SysV shared memory of this IPC namespace: at most ``limit_bytes`` (the default is unlimited,
    and such memory escapes RLIMIT_AS)."""
    try:
        _write("/proc/sys/kernel/shmmax", str(limit_bytes))
        _write("/proc/sys/kernel/shmall", str(max(1, limit_bytes // os.sysconf("SC_PAGE_SIZE"))))
    except OSError:
        return None
    return limit_bytes


# --- the job ---------------------------------------------------------------------------------


def set_limits(config: dict[str, Any]) -> None:
    limits = {
        resource.RLIMIT_CPU: config.get("cpu_seconds"),
        resource.RLIMIT_FSIZE: config.get("file_bytes"),
        resource.RLIMIT_NPROC: config.get("processes"),
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_AS: config.get("address_space_bytes"),
    }
    for which, value in limits.items():
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))


def become_job(config: dict[str, Any], argv: list[str], init_pid: int, error_pipe: int) -> None:
    """Runs in the forked job process: never returns (execve, or exit 125 with the reason)."""
    try:
        for number in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):  # Python's choices, not the job's
            signal.signal(number, signal.SIG_DFL)
        set_limits(config)
        if config.get("nice"):  # before the uids change: only the runner may lower it again
            os.setpriority(os.PRIO_PROCESS, 0, int(config["nice"]))
        env = dict(os.environ)
        child_uid = config.get("child_uid")
        if config.get("uid") is not None:
            jail_ids.become(
                int(config["uid"]), int(config["gid"]), None if child_uid is None else int(child_uid)
            )
            if child_uid is not None:
                env[jail_ids.CHILD_UID_VARIABLE] = str(child_uid)
        prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid binary gives back what was dropped
        if config.get("seccomp"):
            jail_filter.load()  # last before exec: a refused call above would have failed here
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # set after the uid change, which clears it
        if os.getppid() != init_pid:
            raise JailError("init exited during setup")
        os.umask(0o077)
        os.execve(argv[0], argv, env)
    except BaseException as error:  # every failure must reach init, then exit 125
        os.write(error_pipe, f"{error}".encode()[:4000])
    os._exit(EXIT_JAIL_FAILED)


def start_job(config: dict[str, Any], argv: list[str]) -> tuple[int, str]:
    """Fork the job; returns its pid and, when it could not exec, why (empty when it runs)."""
    reader, writer = os.pipe2(os.O_CLOEXEC)
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        become_job(config, argv, me, writer)
    os.close(writer)
    chunks = []
    while chunk := os.read(reader, 4096):
        chunks.append(chunk)
    os.close(reader)
    return pid, b"".join(chunks).decode(errors="replace")


def reap_until(job: int, pid_namespace: bool, grace_s: float = 10.0) -> tuple[int, int]:
    """Reap every child until the job exits, then kill and reap what is left.
    Returns (the job's exit code, how many leftovers were killed)."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == job:
            code = os.waitstatus_to_exitcode(status)
            break
    killed, deadline = 0, time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _kill_leftovers(pid_namespace)
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
            continue
        killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return code, killed


def _kill_leftovers(pid_namespace: bool) -> None:
    # As PID 1, kill(-1) reaches every other process of the namespace; without a pid namespace
    # it would reach the whole host, so then only our children (orphans come to us, a subreaper).
    targets = [-1] if pid_namespace else _children()
    for target in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def _children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry))
    return found


def init(config: dict[str, Any], argv: list[str], outer: int, facts_fd: int | None, names: list[str]) -> None:
    """PID 1 of the job's namespace (or a subreaper without one): never returns."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # The outer process is outside a new pid namespace (getppid() is 0 there); should it
        # die before this line, init is still in the runner's process group and killed with it.
        if "pid" not in names and os.getppid() != outer:
            raise JailError("the jail exited during setup")
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # init takes no orders from the job
        facts: dict[str, Any] = {"namespaces": names, "user_namespace": bool(config.get("user_namespace"))}
        if "mount" in names:
            facts.update(build_view(config, "pid" in names, jail_ids.user_entries(config)))
        if "ipc" in names:
            facts["shm_limit_bytes"] = cap_shared_memory(int(config["shm_bytes"]))
        # Nothing the runner's session keyring holds is the job's (keyctl is refused anyway).
        facts["session_keyring"] = "fresh" if jail_ids.fresh_session_keyring() else "inherited"
        facts.update(child_uid=config.get("child_uid"), seccomp=bool(config.get("seccomp")))
        job, error = start_job(config, argv)
    except (JailError, OSError, ValueError, KeyError) as problem:
        _report(facts_fd, {"started": False, "error": str(problem)})
        os.write(2, f"solboard-jail: {problem}\n".encode())
        os._exit(EXIT_JAIL_FAILED)
    _report(facts_fd, {**facts, "started": not error, "error": error, "job_pid": job})
    if error:
        os.write(2, f"solboard-jail: {error}\n".encode())
    code, killed = reap_until(job, "pid" in names)
    _report(facts_fd, {"job_exit": code, "leftovers_killed": killed})
    os._exit(code if code >= 0 else 128 - code)


def _report(facts_fd: int | None, facts: dict[str, Any]) -> None:
    if facts_fd is not None:
        os.write(facts_fd, (json.dumps(facts) + "\n").encode())


def enter(config: dict[str, Any], argv: list[str]) -> None:
    """The outer process: namespaces, then init; exits as init does."""
    facts_fd = config.get("facts_fd")
    if facts_fd is not None:
        os.set_inheritable(int(facts_fd), False)  # never reaches the job (close-on-exec)
        facts_fd = int(facts_fd)
    runner = os.getppid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner:
        raise JailError("the runner exited during setup")
    names = [name for name in NAMESPACES if name in config.get("namespaces", [])]
    _report(facts_fd, {"cgroup": join_cgroup(config.get("cgroup_procs") or [])})
    try:
        enter_namespaces(names, bool(config.get("user_namespace")))
    except (JailError, OSError) as error:
        _report(facts_fd, {"started": False, "error": str(error)})
        raise
    # After the id maps (a non-dumpable process may not write its own): no ptrace of the jail
    # by the job, even as the same uid.
    prctl(PR_SET_DUMPABLE, 0)
    me = os.getpid()
    child = os.fork()
    if child == 0:
        init(config, argv, me, facts_fd, names)
    _report(facts_fd, {"init_pid": child})  # the runner reaps it should this process die first
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def join_cgroup(procs_files: list[str]) -> list[str]:
    """Move this process (and so everything the job will start) into the job's cgroup(s), made by
    the runner; returns the files it was written to (the runner reports a failure as a gap)."""
    joined = []
    for path in procs_files:
        try:
            _write(path, str(os.getpid()))
            joined.append(path)
        except OSError:
            pass
    return joined


def kill_uid(uid: int) -> None:
    """As ``uid``, kill(-1, SIGKILL) reaches every process of that user but this one."""
    os.setgroups([])
    os.setgid(os.getgid())
    os.setuid(uid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def _probe_one(name: str, user_namespace: bool) -> bool:
    """Can a child create namespace ``name`` (and, for mount / pid, mount a tmpfs / a proc)?"""
    pid = os.fork()
    if pid == 0:
        try:
            enter_namespaces([name, "mount"] if name == "pid" else [name], user_namespace)
            if name in ("mount", "pid"):
                _probe_mount(name)
            os._exit(0)
        except BaseException:  # the answer is the exit status
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _probe_mount(name: str) -> None:
    child = os.fork()  # a new pid namespace applies to children only
    if child == 0:
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            if name == "pid":
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            else:
                mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
            os._exit(0)
        except BaseException:
            os._exit(1)
    if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0:
        raise JailError(f"cannot mount in a new {name} namespace")


def _probe_seccomp() -> str:
    """"" when the job's seccomp filter loads here (tried in a throwaway child), else why not."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            jail_filter.load()
            os._exit(0)
        except BaseException as error:  # the answer is what went wrong
            os.write(writer, str(error).encode()[:500])
            os._exit(1)
    os.close(writer)
    why = os.read(reader, 600).decode(errors="replace")
    os.close(reader)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "" if code == 0 else why or f"exit status {code}"


def probe() -> dict[str, Any]:
    root = os.geteuid() == 0
    user_namespace = not root
    return {
        "root": root,
        "user_namespace": user_namespace,
        "namespaces": [name for name in NAMESPACES if _probe_one(name, user_namespace)],
        "seccomp_refused": _probe_seccomp(),
    }


def main(args: list[str]) -> None:
    try:
        if args[:1] == ["--probe"]:
            print(json.dumps(probe()))
            return
        if args[:1] == ["--kill-uid"]:
            kill_uid(int(args[1]))
            return
        config, separator, argv = json.loads(args[0]), args[1], args[2:]
        if separator != "--" or not argv:
            raise JailError("usage: jail.py CONFIG_JSON -- ARGV...")
        enter(config, argv)
    except (JailError, OSError, ValueError, IndexError) as error:
        os.write(2, f"solboard-jail: {error}\n".encode())
        os._exit(EXIT_JAIL_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
