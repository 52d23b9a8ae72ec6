"""Local state under ``var/`` belongs to the user who runs the site: the folder 0700, files 0600.

``var/`` holds the SQLite database (password hashes, private sources, secret seeds), the embedded
broker (queued jobs), Celery results and keys. A job, or any other user of the host, must not read
them: with the usual umask 022 every one of them came out world-readable. Two habits fix that:
create each file with mode 0600 before SQLite or anything else opens it (SQLite gives its -wal and
-shm files the mode of the database file), and at ``solboard dev`` start take group and other
permissions away from what an older version left behind.

The runner's own state folder (``var/runner/``) is left to the runner, which sets its modes itself
(its scratch folders must stay traversable by the job user).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
RUNNER_STATE = "runner"  # var/runner/<node>: modes managed by runners.slots / runners.sandbox


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) with the folder itself 0700; an existing one is tightened."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    _strip_group_and_other(path)
    return path


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; either way, only its owner may read it."""
    path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        mode = stat.S_IMODE(os.fstat(descriptor).st_mode)
        if mode & 0o077:
            os.fchmod(descriptor, mode & ~0o077)
    finally:
        os.close(descriptor)


def tighten_var(var: Path) -> list[Path]:
    """``var`` 0700 and everything in it without group/other bits, but the runner's state.
    Returns what changed (the caller says so once: an old checkout left readable files)."""
    changed = [var] if _strip_group_and_other(var) else []
    for folder, subfolders, files in os.walk(var):
        if Path(folder) == var and RUNNER_STATE in subfolders:
            subfolders.remove(RUNNER_STATE)
        for name in [*subfolders, *files]:
            path = Path(folder) / name
            if not path.is_symlink() and _strip_group_and_other(path):
                changed.append(path)
    return changed


def _strip_group_and_other(path: Path) -> bool:
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return False
    path.chmod(mode & ~0o077)
    return True
