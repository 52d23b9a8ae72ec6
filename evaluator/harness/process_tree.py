"""The judge's view of the processes a job started: who descends from whom, and clearing them out.

The judge is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process the submission double-forks
to escape its parent is re-parented to the judge, never to init, so every process of the job stays
in the judge's tree. Before the witness session (and again when it ends) the judge kills every
descendant that is not part of it, so no helper of the timing child can impersonate the witness
process, do its work out of Nsight Compute's sight, or write into ncu's output (docs/security.md).
Linux only; on a host without ``/proc`` the functions see no process and kill nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import struct
import time
from collections.abc import Collection
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE = 4
#: Set by ``python -m evaluator run`` (the process a runner starts for a job): only a process that
#: exists for one job may reap orphans and kill its other descendants. A program that calls
#: ``evaluator.api.evaluate`` in-process (a test, a notebook) keeps its own children untouched.
_owns_tree = False
#: Kill rounds before giving up on a process tree that keeps forking.
SWEEP_ROUNDS = 50
#: Seconds to wait for a killed orphan to be reapable (one stuck in a driver call stays a zombie).
REAP_WAIT_S = 2.0


def not_dumpable() -> bool:
    """No process of the same user may ptrace this one or read its memory (``PR_SET_DUMPABLE`` 0).
    Here, beside the tree's other guards, so a warm spare sets it before it imports torch."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def own_process_tree() -> None:
    global _owns_tree
    _owns_tree = True


def owns_tree() -> bool:
    return _owns_tree


def become_subreaper() -> bool:
    if not _owns_tree:
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_map() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process this one can see."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] not in ("Z", "X"):  # a zombie runs nothing; its parent reaps it
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(root: int, parents: dict[int, int] | None = None) -> set[int]:
    parents = parent_map() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def is_descendant(pid: int, ancestor: int) -> bool:
    return pid in descendants(ancestor)


def peer_pid(connection: socket.socket) -> int:
    """The pid of the process at the other end of a Unix socket, as the kernel recorded it."""
    pid, _uid, _gid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
    return int(pid)


def sweep(root: int, keep: Collection[int], keep_trees: Collection[int] = (),
          not_under: int | None = None) -> list[str]:
    """Kill every descendant of ``root`` except ``keep`` and the trees under ``keep_trees`` (less
    whatever descends from ``not_under``); reap the ones re-parented to this process. Returns a line
    per killed process (pid and program)."""
    killed: list[str] = []
    for _ in range(SWEEP_ROUNDS if _owns_tree else 0):
        parents = parent_map()
        spared = set(keep) | set(keep_trees)
        for tree in keep_trees:
            spared |= descendants(tree, parents)
        if not_under is not None:
            spared -= descendants(not_under, parents)
        targets = descendants(root, parents) - spared
        if not targets:
            break
        for pid in targets:
            killed.append(f"{pid} {_program(pid)}")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap(targets, parents)
    return killed


def _reap(pids: set[int], parents: dict[int, int]) -> None:
    """Orphans re-parented to us are ours to wait for (never a ``subprocess.Popen`` child: those
    are kept, and waited for by their owner)."""
    me = os.getpid()
    waiting = {pid for pid in pids if parents.get(pid) == me}
    deadline = time.monotonic() + REAP_WAIT_S
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)


def _program(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "?"
