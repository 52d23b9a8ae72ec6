"""Exec trampoline that puts one job in its jail, then becomes the job (``os.execve``).

Run as a script with the interpreter isolated (``python -I -S runners/jail.py CONFIG -- ARGV``):
it imports nothing from the project or site-packages, so a fresh single-threaded process does the
privileged steps, in this order, and only then runs untrusted code:

1. new network namespace (only loopback, brought up) and, as root, a new mount namespace where
   /tmp, /var/tmp and /dev/shm are private tmpfs (writes there vanish with the job);
2. resource limits (CPU seconds, file size, processes, no core dumps, address space if asked);
3. as root: drop to the job user (no supplementary groups);
4. parent-death signal SIGKILL (set after the uid change, which clears it), umask 077, exec.

Why a trampoline rather than ``preexec_fn``: Popen's ``user=`` drops privileges *before*
``preexec_fn`` runs (so unshare would fail), and ``preexec_fn`` is unsafe in a threaded parent.
Any failure exits with status 125 and a line starting with ``solboard-jail:`` on stderr.

Two other modes: ``--probe`` prints what this kernel allows (JSON); ``--kill-uid UID`` becomes
UID and sends SIGKILL to every process of that user (``kill(-1)``), which also reaches processes
that left the job's process group.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import struct
import sys
from typing import Any

EXIT_JAIL_FAILED = 125
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
MASKED_DIRS = ("/tmp", "/var/tmp", "/dev/shm")

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(RuntimeError):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise JailError(f"{what} failed: {os.strerror(errno)} (errno {errno})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    encoded = [None if value is None else value.encode() for value in (source, target, fstype, data)]
    result = _libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3])
    _check(result, f"mount {target}")


def loopback_up() -> None:
    """A new network namespace starts with ``lo`` down; local IPC (NCCL, torch.distributed) wants it."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def private_tmp(keep_visible: str, tmpfs_bytes: int) -> list[str]:
    """Mount fresh tmpfs over the world-writable folders (never over the job's own scratch)."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    masked = []
    for folder in MASKED_DIRS:
        if not os.path.isdir(folder) or keep_visible.startswith(folder.rstrip("/") + "/"):
            continue
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_bytes},mode=1777")
        masked.append(folder)
    return masked


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


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise JailError("uid did not change")


def enter(config: dict[str, Any], argv: list[str]) -> None:
    parent = os.getppid()
    flags = (CLONE_NEWNET if config.get("network_namespace") else 0) | (
        CLONE_NEWNS if config.get("mount_namespace") else 0
    )
    if flags:
        unshare(flags)
    if config.get("network_namespace"):
        loopback_up()
    if config.get("mount_namespace"):
        private_tmp(config.get("scratch", ""), int(config.get("tmpfs_bytes", 256 << 20)))
    set_limits(config)
    if config.get("uid") is not None:
        drop_privileges(int(config["uid"]), int(config["gid"]))
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != parent:  # the runner died while we were setting up
        raise JailError("parent exited during setup")
    os.umask(0o077)
    os.execve(argv[0], argv, dict(os.environ))


def kill_uid(uid: int) -> None:
    """As ``uid``, kill(-1, SIGKILL) reaches every process of that user but this one."""
    os.setgroups([])
    os.setgid(os.getgid())
    os.setuid(uid)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _probe_one(flags: int) -> str:
    pid = os.fork()
    if pid == 0:
        try:
            unshare(flags)
            if flags & CLONE_NEWNET:
                loopback_up()
            if flags & CLONE_NEWNS:
                private_tmp("", 1 << 20)
            os._exit(0)
        except BaseException as error:  # noqa: BLE001 - report through the exit status; the text is lost
            os.write(2, f"{error}\n".encode())
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return "yes" if os.waitstatus_to_exitcode(status) == 0 else "no"


def probe() -> dict[str, Any]:
    root = os.geteuid() == 0
    return {
        "root": root,
        "network_namespace": _probe_one(CLONE_NEWNET) == "yes",
        "mount_namespace": root and _probe_one(CLONE_NEWNS) == "yes",
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
