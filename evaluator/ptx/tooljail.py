"""Exec trampoline that jails one CUDA tool run (nvcc, ptxas) on untrusted source, then becomes it.

Run as a script with the interpreter isolated (``python -I -S tooljail.py CONFIG -- ARGV``): it
imports nothing from the project or site-packages, so a fresh single-threaded process does the
privileged steps and only then executes the compiler:

1. where the kernel allows it (as root, or through a user namespace otherwise): new network and
   mount namespaces; an empty tmpfs becomes the root, holding read-only bind mounts of the
   toolchain and include folders listed in the config, /dev/null, a small /tmp and the compile
   folder (the only writable place); then ``chroot`` into it. Nothing else of the host — the
   site's database, its settings, other users' files, /proc — exists in there;
2. resource limits: CPU seconds, address space, file size, processes (beyond what the user already
   runs), no core dumps;
3. as root: become ``nobody`` (no supplementary groups), so files only root may read stay closed
   even where namespaces are not available;
4. no new privileges, parent-death signal SIGKILL, umask 077, exec with the environment given.

The runner has its own trampoline (runners/jail.py) for whole jobs; this one is the evaluator's,
so the site and the CLI can jail a compile without importing the runner. Any failure exits with
status 125 and a line starting with ``solboard-tooljail:`` on stderr.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from typing import Any

EXIT_JAIL_FAILED = 125
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
NOBODY = 65534
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(RuntimeError):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise JailError(f"{what} failed: {os.strerror(errno)} (errno {errno})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if value is None else value.encode() for value in (source, target, fstype, data)]
    _check(
        _libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]), f"mount {target}"
    )


def _unshare(as_root: bool) -> None:
    flags = CLONE_NEWNS | CLONE_NEWNET | (0 if as_root else CLONE_NEWUSER)
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")
    if as_root:
        return
    # Map our own ids onto themselves: after exec we are an ordinary user again (no capabilities).
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def _kept_flags(path: str) -> int:
    # A remount inside a user namespace must keep the flags the original mount has locked.
    found = os.statvfs(path).f_flag
    return found & (MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _bind(root: str, path: str, readonly: bool) -> None:
    target = root + path
    if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems: the same link inside
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(path, target, None, MS_BIND | MS_REC)
    if readonly:
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | _kept_flags(path)
        _mount(None, target, None, flags)


def build_view(config: dict[str, Any]) -> None:
    """An empty root with only the listed folders (read-only), /dev/null, /tmp and the work folder."""
    root, workdir = config["new_root"], config["workdir"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=0755")
    for path in config["view"]:
        if os.path.lexists(path):
            _bind(root, path, readonly=True)
    for device in DEVICES:
        if os.path.exists(device):
            _bind(root, device, readonly=False)
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={config['tmp_bytes']},mode=1777")
    _bind(root, workdir, readonly=False)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(root)


def _tasks_of(uid: int) -> int:
    """Threads the user already runs: RLIMIT_NPROC counts them all, not only this compile's."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return count


def set_limits(config: dict[str, Any], uid: int) -> None:
    limits = {
        resource.RLIMIT_CPU: config.get("cpu_seconds"),
        resource.RLIMIT_AS: config.get("address_space_bytes"),
        resource.RLIMIT_FSIZE: config.get("file_bytes"),
        resource.RLIMIT_CORE: 0,
    }
    if config.get("processes") is not None:
        limits[resource.RLIMIT_NPROC] = _tasks_of(uid) + int(config["processes"])
    for which, value in limits.items():
        if value is None:
            continue
        hard = resource.getrlimit(which)[1]  # inside a runner's job the caller may be limited already
        wanted = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        # CPU: SIGXCPU at the soft limit (the compiler says so), SIGKILL a little later.
        ceiling = wanted + 2 if which == resource.RLIMIT_CPU and hard == resource.RLIM_INFINITY else wanted
        resource.setrlimit(which, (wanted, ceiling))


def _give_work_folder_to(uid: int, workdir: str) -> None:
    os.chmod(os.path.dirname(workdir), 0o711)  # traversable (the folder above is 0700, root's)
    for folder, _, files in os.walk(workdir):
        os.chown(folder, uid, uid)
        for name in files:
            os.chown(os.path.join(folder, name), uid, uid)


def become_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    if os.getuid() != NOBODY or os.geteuid() != NOBODY:
        raise JailError("uid did not change")


def enter(config: dict[str, Any], argv: list[str], env: dict[str, str]) -> None:
    parent, as_root = os.getppid(), os.geteuid() == 0
    os.umask(0o022)  # the view's folders must be traversable by nobody
    if as_root:
        _give_work_folder_to(NOBODY, config["workdir"])
    set_limits(config, NOBODY if as_root else os.getuid())  # before the chroot: counts through /proc
    if config.get("namespaces"):
        _unshare(as_root)
        build_view(config)
    if as_root:
        become_nobody()
    os.chdir(config["workdir"])
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != parent:  # the caller died while we were setting up
        raise JailError("parent exited during setup")
    os.umask(0o077)
    os.execve(argv[0], argv, env)


def main(args: list[str]) -> None:
    try:
        config, separator, argv = json.loads(args[0]), args[1], args[2:]
        if separator != "--" or not argv:
            raise JailError("usage: tooljail.py CONFIG_JSON -- ARGV...")
        enter(config, argv, dict(os.environ))
    except (JailError, OSError, ValueError, IndexError, KeyError) as error:
        os.write(2, f"solboard-tooljail: {error}\n".encode())
        os._exit(EXIT_JAIL_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
