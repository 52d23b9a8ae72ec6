"""Finding, killing and reaping a job's processes through /proc (Linux). No third-party dependency."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

#: Set in every job's environment (not a secret): lets a runner that is not root find processes
#: of the job that left its process group, since they all share its uid.
MARKER_VARIABLE = "SOLBOARD_JOB_MARKER"
PROC = Path("/proc")


def _pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    return text[text.rfind(")") + 2 :].split()


def is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    members = []
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(pid)
    return members


def kill_group(pgid: int, rounds: int = 5, killed: set[int] | None = None) -> int:
    """SIGKILL the process group until it is empty; returns the most members seen alive
    (and adds them to ``killed``)."""
    seen = 0
    for _ in range(rounds):
        members = group_members(pgid)
        if not members:
            break
        seen = max(seen, len(members))
        if killed is not None:
            killed.update(members)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.05)
    return seen


def uid_of(pid: int) -> int | None:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def pids_of_uid(uid: int) -> list[int]:
    return [pid for pid in _pids() if uid_of(pid) == uid and not is_zombie(pid)]


def _status_field(pid: int, name: str) -> list[str]:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split()[1:]
    except OSError:
        pass
    return []


def pids_with_uid(uid: int) -> list[int]:
    """Live processes whose real, effective or saved uid is ``uid`` (a judge runs as (J, C, J))."""
    return [pid for pid in _pids() if str(uid) in _status_field(pid, "Uid")[:3] and not is_zombie(pid)]


def state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (R, S, D, T, t, Z...), None when it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def children(pid: int) -> list[int]:
    return [
        other for other in _pids() if (fields := _stat_fields(other)) is not None and int(fields[1]) == pid
    ]


def namespace_pid(pid: int) -> int | None:
    """``pid``'s number in its innermost pid namespace (the last of /proc/PID/status's NSpid)."""
    numbers = _status_field(pid, "NSpid")
    return int(numbers[-1]) if numbers else None


def _has_marker(pid: int, marker: str) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_VARIABLE}={marker}".encode() in environ.split(b"\0")


def marked(marker: str) -> list[int]:
    """Live processes (but this one) whose environment carries the job marker."""
    me = os.getpid()
    return [pid for pid in _pids() if pid != me and not is_zombie(pid) and _has_marker(pid, marker)]


def kill_marked(marker: str, rounds: int = 5, killed: set[int] | None = None) -> int:
    """SIGKILL every process whose environment carries the job marker (our own uid only)."""
    seen = 0
    for _ in range(rounds):
        pids = marked(marker)
        if not pids:
            break
        seen = max(seen, len(pids))
        if killed is not None:
            killed.update(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return seen


def zombie_children() -> list[tuple[int, int | None, int]]:
    """(pid, uid, process group) of each child of this process that has exited, unreaped."""
    me, found = os.getpid(), []
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[0] == "Z" and int(fields[1]) == me:
            found.append((pid, uid_of(pid), int(fields[2])))
    return found


def reap_children(ours: Callable[[int, int | None, int], bool], wait_s: float = 2.0) -> int:
    """Reap the zombie children that ``ours(pid, uid, group)`` claims; returns how many.

    Never ``waitpid(-1)``: that would steal the exit status of a child some Popen still waits
    for. Killed processes take a moment to become zombies, hence a short wait."""
    reaped, deadline = 0, time.monotonic() + wait_s
    while True:
        for pid, uid, group in zombie_children():
            if ours(pid, uid, group):
                with contextlib.suppress(ChildProcessError):
                    reaped += os.waitpid(pid, os.WNOHANG)[0] == pid
        if time.monotonic() >= deadline or not _dying_children(ours):
            return reaped
        time.sleep(0.02)


def _dying_children(ours: Callable[[int, int | None, int], bool]) -> bool:
    """A child of ours that was killed but is not a zombie yet (or one that just became one)."""
    me = os.getpid()
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and int(fields[1]) == me and ours(pid, uid_of(pid), int(fields[2])):
            return True
    return False


PR_SET_CHILD_SUBREAPER = 36


def set_child_subreaper() -> None:
    """Orphaned descendants of this process are re-parented to it rather than to init."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not is_zombie(pid)


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (a warm spare's jail: its init and everything under it)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def renice(pids: set[int], niceness: int) -> int:
    """Set every thread of these processes to ``niceness`` (niceness is per thread on Linux);
    returns how many threads changed. Lowering it needs root: threads it cannot change are skipped."""
    changed = 0
    for pid in pids:
        try:
            tids = [int(task.name) for task in (PROC / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
            except OSError:
                continue
            changed += 1
    return changed


def niceness(pid: int) -> int | None:
    """A process's niceness (its main thread's), or None when it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[16])


def kill_uids_except(uids: set[int], keep: set[int], rounds: int = 5) -> int:
    """SIGKILL every process whose real, effective or saved uid is one of ``uids`` and that is not
    in ``keep`` (the slot's warm spare); returns the most seen alive."""
    seen = 0
    for _ in range(rounds):
        pids = [pid for pid in _pids() if pid not in keep and not is_zombie(pid)
                and {str(uid) for uid in uids} & set(_status_field(pid, "Uid")[:3])]
        if not pids:
            break
        seen = max(seen, len(pids))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return seen
