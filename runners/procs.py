"""Finding and killing a job's processes through /proc (Linux). No third-party dependency."""

from __future__ import annotations

import os
import signal
import time
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


def kill_group(pgid: int, rounds: int = 5) -> int:
    """SIGKILL the process group until it is empty; returns the most members seen alive."""
    seen = 0
    for _ in range(rounds):
        members = group_members(pgid)
        if not members:
            break
        seen = max(seen, len(members))
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


def _has_marker(pid: int, marker: str) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_VARIABLE}={marker}".encode() in environ.split(b"\0")


def kill_marked(marker: str, rounds: int = 5) -> int:
    """SIGKILL every process whose environment carries the job marker (our own uid only)."""
    me, seen = os.getpid(), 0
    for _ in range(rounds):
        pids = [pid for pid in _pids() if pid != me and not is_zombie(pid) and _has_marker(pid, marker)]
        if not pids:
            break
        seen = max(seen, len(pids))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return seen


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not is_zombie(pid)
