"""The job's view of the file system, built by the jail's init in the job's new mount namespace.

Standard library only: ``runners/jail.py`` imports it in an isolated interpreter (``-I -S``).

Read-only everywhere but the scratch folder; a fresh tmpfs over the world-writable folders; an
empty tmpfs over every folder the runner hides (its state, other jobs' scratch folders, the
development database), **at every path where that folder can be reached**: its own, the path of
every other mount of the same file system that shows it (a bind mount of the checkout, the
checkout's own source), and again after the paths the job must run were bound back from under a
private /tmp (a checkout under /tmp is bound back whole, its ``var/`` with it: the mask comes
after). A fresh /proc; the job's user names in /etc/passwd and /etc/group.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
#: statvfs flag -> mount flag a read-only remount must keep (a user namespace may not drop them).
KEPT_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
              os.ST_NOATIME: 1024, os.ST_NODIRATIME: 2048, os.ST_RELATIME: 1 << 21}
#: World-writable folders where one job could leave something for the next: each gets a fresh
#: tmpfs (``/var/lock`` is usually a link to ``/run/lock``, which is then recreated empty).
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/var/lock", "/run/lock")
#: Pseudo file systems that are not storage (a fresh /proc replaces the host's).
NOT_STORAGE = ("/proc",)
#: Where init writes the job's /etc/passwd and /etc/group (in the job's fresh /run).
USERS_FOLDER = "/run/solboard-jail"

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(RuntimeError):
    pass


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise JailError(f"{what} failed: {os.strerror(errno)} (errno {errno})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if value is None else value.encode() for value in (source, target, fstype, data)]
    result = _libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3])
    check(result, f"mount {target}")


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def mounts() -> list[tuple[str, str, str]]:
    """(device, root inside its file system, mount point) of every mount, in mountinfo order."""
    with open("/proc/self/mountinfo") as handle:
        fields = [line.split() for line in handle]
    return [(row[2], _unescape(row[3]), _unescape(row[4])) for row in fields if len(row) > 4]


def mount_points() -> list[str]:
    """Every mount point of this mount namespace, shallowest first."""
    return sorted({point for _, _, point in mounts()}, key=lambda point: (point.count("/"), point))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _join(base: str, relative: str) -> str:
    return os.path.normpath(os.path.join(base, relative)) if relative != "." else base


def aliases(folder: str) -> list[str]:
    """Every path of this namespace that shows ``folder`` (the same file-system object through
    another mount of its file system), ``folder`` included."""
    real = os.path.realpath(folder)
    try:
        wanted = os.stat(real)
    except OSError:
        return []
    table = mounts()
    holders = [entry for entry in table if _under(real, entry[2])]
    if not holders:
        return [real]
    depth = max(len(point) for _, _, point in holders)
    device, root, point = [entry for entry in holders if len(entry[2]) == depth][-1]  # the one on top
    inside = _join(root, os.path.relpath(real, point))
    found = {real}
    for other_device, other_root, other_point in table:
        if other_device == device and _under(inside, other_root):
            candidate = _join(other_point, os.path.relpath(inside, other_root))
            try:
                seen = os.stat(candidate)
            except OSError:
                continue
            if (seen.st_dev, seen.st_ino) == (wanted.st_dev, wanted.st_ino):
                found.add(candidate)
    return sorted(found)


def _kept_flags(path: str) -> int:
    return sum(flag for st_flag, flag in KEPT_FLAGS.items() if os.statvfs(path).f_flag & st_flag)


def remount_read_only(keep_writable: str) -> list[str]:
    """Every mount read-only but the scratch folder's; returns the ones that refused."""
    failed = []
    for point in mount_points():
        if point == keep_writable or any(_under(point, skip) for skip in NOT_STORAGE):
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(point))
        except (JailError, OSError) as error:
            failed.append(f"{point} ({error})")
    return failed


def mask(folders: list[str], tmpfs_bytes: int, mode: str, sizes: dict[str, int] | None = None) -> list[str]:
    """A fresh tmpfs over each folder that exists now; one an earlier mask of the list hid is
    recreated in it. Returns the folders masked (a requested folder that does not exist is not
    visible either)."""
    masked = []
    for folder in [folder for folder in folders if os.path.isdir(folder)]:
        if os.path.isdir(folder):
            size = (sizes or {}).get(folder, tmpfs_bytes)
            mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")
        else:
            _traversable_path_to(folder)
            os.chmod(folder, int(mode, 8))
        masked.append(folder)
    return masked


def bind_back(scratch: str, handle: int) -> None:
    """Make the scratch folder reachable again at its own path when a mask hid it."""
    try:
        here = os.stat(scratch)
        if (here.st_dev, here.st_ino) == (os.fstat(handle).st_dev, os.fstat(handle).st_ino):
            return
    except FileNotFoundError:
        pass
    _traversable_path_to(os.path.dirname(scratch))
    os.makedirs(scratch, mode=0o700, exist_ok=True)
    mount(f"/proc/self/fd/{handle}", scratch, None, MS_BIND)


def _traversable_path_to(folder: str) -> None:
    """Create the folders down to ``folder`` in a mask, each 0711: the job can walk to its own
    scratch folder but list none of them (they name the runner's state folders)."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        os.mkdir(path)
        os.chmod(path, 0o711)


def _outermost(paths: list[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(_under(path, outer) for outer in kept):
            kept.append(path)
    return kept


def keep_handles(config: dict[str, Any], masked_roots: list[str]) -> dict[str, int]:
    """O_PATH handles on what the job must run that a mask is about to hide (taken before it)."""
    wanted = [os.path.realpath(path) for path in config.get("keep", [])]
    wanted = [
        path for path in wanted if os.path.isdir(path) and any(_under(path, root) for root in masked_roots)
    ]
    return {path: os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for path in _outermost(wanted)}


def bind_back_read_only(handles: dict[str, int]) -> list[str]:
    for path, handle in handles.items():
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount(f"/proc/self/fd/{handle}", path, None, MS_BIND)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(path))
        os.close(handle)
    return list(handles)


def name_the_users(passwd_lines: str, group_lines: str) -> bool:
    """/etc/passwd and /etc/group as the host has them plus the job's users, bound read-only over
    the host's files (in the job's mount namespace only). False where /run is not the job's own."""
    if not passwd_lines or not os.path.ismount("/run"):
        return False
    os.makedirs(USERS_FOLDER, mode=0o755, exist_ok=True)
    for name, extra in (("passwd", passwd_lines), ("group", group_lines)):
        names = {line.split(":", 1)[0] for line in extra.splitlines()}
        try:
            with open(f"/etc/{name}") as handle:
                host = [
                    line
                    for line in handle.read().splitlines(keepends=True)
                    if line.split(":", 1)[0] not in names
                ]
        except OSError:
            host = []
        if host and not host[-1].endswith("\n"):
            host[-1] += "\n"
        path = f"{USERS_FOLDER}/{name}"
        with open(path, "w") as handle:
            handle.write("".join(host) + extra)
        os.chmod(path, 0o644)
        if os.path.exists(f"/etc/{name}"):
            mount(path, f"/etc/{name}", None, MS_BIND)
            mount(None, f"/etc/{name}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(f"/etc/{name}"))
    return True


def build_view(config: dict[str, Any], pid_namespace: bool, users: tuple[str, str]) -> dict[str, Any]:
    """The job's file system (see the module's docstring); returns the facts of what applied."""
    scratch, cwd = os.path.realpath(config["scratch"]), os.getcwd()
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount reaches the host
    mount(scratch, scratch, None, MS_BIND)  # its own mount point: left writable below
    handle = os.open(scratch, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    facts: dict[str, Any] = {"read_only_failed": remount_read_only(scratch)}
    facts["read_only"] = not facts["read_only_failed"]
    private = sorted({os.path.realpath(folder) for folder in PRIVATE_DIRS}, key=len)
    requested = [os.path.realpath(folder) for folder in config.get("hide", [])]
    # Every path that shows a hidden folder, found while everything is still in sight.
    hide = sorted({alias for folder in requested for alias in aliases(folder)}, key=len)
    kept = keep_handles(config, private + hide)
    facts["private"] = mask(
        private, int(config["tmpfs_bytes"]), "1777", {"/dev/shm": int(config["shm_bytes"])}
    )
    facts["kept_read_only"] = bind_back_read_only(kept)
    masked = mask(hide, 1 << 20, "0711")  # after the bind-back, which may have brought some back
    facts["hidden"] = sorted(set(requested) | set(masked))
    facts["hidden_unmasked"] = [folder for folder in hide if folder not in masked and os.path.exists(folder)]
    facts["users_named"] = name_the_users(*users)
    if os.path.ismount("/dev/mqueue"):  # POSIX queues of the new IPC namespace, not the host's
        mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    facts["proc"] = "host"
    if pid_namespace:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        facts["proc"] = "own"
    bind_back(scratch, handle)
    os.close(handle)
    os.chdir(cwd)  # the working folder still named the old, now read-only, mount
    return facts
