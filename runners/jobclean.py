"""After a job: its scratch folder removed, every process of it killed and reaped.

The job's process group first, then every process of its uids (``kill(-1)`` as each uid: the
judge's (J, C, J) is reached as J, the untrusted processes as C), then, for a runner that is not
root, every process carrying the job's marker variable; the jail's init and the killed processes
that are this worker's children are reaped (the worker is a subreaper).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Self

from runners import procs

if TYPE_CHECKING:
    from runners.sandbox import JobUser

JAIL = Path(__file__).resolve().with_name("jail.py")


class Scratch:
    """A fresh folder owned by the job user, removed on exit (whatever the job left in it)."""

    def __init__(self, root: Path, user: JobUser | None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)  # traversable, not listable: jobs cannot see each other's folders
        self.path = Path(tempfile.mkdtemp(prefix="job-", dir=root))
        (self.path / "tmp").mkdir()
        if user is not None:
            for folder in (self.path, self.path / "tmp"):
                os.chown(folder, user.owner, user.gid)
        os.chmod(self.path, 0o700)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, onerror=_force_remove)


def _force_remove(function: Callable[..., object], path: str, exc_info: object) -> None:
    # A job can leave read-only folders behind; when not root, make them writable and retry.
    parent = os.path.dirname(path)
    for target in (parent, path):
        with contextlib.suppress(OSError):
            os.chmod(target, 0o700)
    try:
        function(path)
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def cleanup(pgid: int, user: JobUser | None, marker: str | None, init_pid: int | None = None) -> int:
    """Kill the job's process group, every process of its uids, and (not root) every process
    that still carries the job's marker variable; then reap those of them that are our children
    (the jail's init among them, should it outlive the jail). Returns how many were killed."""
    killed: set[int] = set()
    survivors = procs.kill_group(pgid, killed=killed)
    if user is not None:
        survivors += kill_user(user, killed=killed)
    if marker:
        survivors += procs.kill_marked(marker, killed=killed)
    candidates = killed | ({init_pid} if init_pid else set())
    uids = set(user.uids) if user is not None else set()
    procs.reap_children(lambda pid, uid, group: pid in candidates or group == pgid or uid in uids)
    return survivors


def kill_user(user: JobUser, rounds: int = 5, killed: set[int] | None = None) -> int:
    """SIGKILL every process of the job's uids (as each uid: ``kill(-1)`` reaches the processes
    whose real or saved uid it is, the judge's (J, C, J) as J)."""
    most = 0
    for _ in range(rounds):
        pids = sorted({pid for uid in user.uids for pid in procs.pids_with_uid(uid)})
        if not pids:
            break
        most = max(most, len(pids))
        if killed is not None:
            killed.update(pids)
        for uid in user.uids:
            subprocess.run(
                [sys.executable, "-I", "-S", str(JAIL), "--kill-uid", str(uid)], check=False, timeout=30
            )
        time.sleep(0.05)
    return most
