"""Per-job uids: each job (and each warm spare) of a slot gets two uids no running job holds.

A slot claims a block of ``BLOCK_SIZE`` uids (an flock held while the node lives, so two slots,
or two nodes on one host, never share one) from a range no account uses (``SOLBOARD_JOB_UID_BASE``,
checked against the password database when claimed). Each job takes the next pair of its block:
the judge's uid and the uid of everything that runs submitted code (``runners/jail_ids.py``). A
pair is handed out again only when no process of either uid is left (one stuck in the driver
keeps its uids out of rotation until it is gone), so:

- nothing per uid carries from one job into the next: RLIMIT_NPROC's count, signals, the
  ``kill every process of the job user`` clean-up, inotify and pipe accounting, and any kernel
  state keyed by uid that the seccomp filter does not already close (docs/security.md);
- a warm spare started while the slot's current job still runs (what issue 36 needs) can never
  share a uid with that job: they hold different pairs.

The uids need no account: the jail names them inside the job's mount namespace only
(``solboard-judge``, ``solboard-job``).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners import procs
from runners.sandbox import JobUser

BASE_VARIABLE = "SOLBOARD_JOB_UID_BASE"
#: How the supervisor tells a slot's worker its block ("first:size").
UID_BLOCK_VARIABLE = "SOLBOARD_RUNNER_UID_BLOCK"
#: Far above the ranges distributions give to users (1000+) and to containers' subordinate ids
#: (100000 + 65536 per user), below 2^31 (some tools read uids as signed).
DEFAULT_BASE = 1_900_000_000
BLOCK_SIZE = 32
BLOCKS = 64
LOCKS = Path(tempfile.gettempdir()) / "solboard-uid-blocks"


class NoUidBlock(RuntimeError):
    pass


def base() -> int:
    return int(os.environ.get(BASE_VARIABLE) or DEFAULT_BASE)


@dataclass(frozen=True)
class UidBlock:
    first: int
    size: int = BLOCK_SIZE

    @property
    def uids(self) -> range:
        return range(self.first, self.first + self.size)

    def to_text(self) -> str:
        return f"{self.first}:{self.size}"

    @classmethod
    def from_text(cls, text: str) -> UidBlock:
        first, size = text.split(":")
        return cls(int(first), int(size))


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def claim_block() -> tuple[UidBlock, Any]:
    """A block no other slot on this machine holds and no account uses, and the lock that keeps
    it ours (closing it gives the block back)."""
    LOCKS.mkdir(mode=0o700, exist_ok=True)
    for index in range(BLOCKS):
        block = UidBlock(base() + index * BLOCK_SIZE)
        if any(_has_account(uid) for uid in block.uids):
            continue
        handle = open(LOCKS / f"{block.first}.lock", "a+")  # noqa: SIM115 - held while the slot lives
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return block, handle
    raise NoUidBlock(f"all {BLOCKS} uid blocks from {base()} are taken or used by accounts on this machine")


def uid_in_use(uid: int) -> bool:
    """Some live process has ``uid`` as its real, effective or saved uid."""
    return bool(procs.pids_with_uid(uid))


class Rotation:
    """Hands out the pairs of one block in turn, skipping any pair a process still holds."""

    def __init__(self, block: UidBlock, in_use: Callable[[int], bool] = uid_in_use) -> None:
        self.block = block
        self.in_use = in_use
        self.next_pair = 0
        #: The keeper's thread starts spares while the job's thread may start a fresh job.
        self._lock = threading.Lock()

    @property
    def pairs(self) -> int:
        return self.block.size // 2

    def take(self) -> JobUser:
        with self._lock:
            return self._take()

    def _take(self) -> JobUser:
        for _ in range(self.pairs):
            judge = self.block.first + 2 * self.next_pair
            self.next_pair = (self.next_pair + 1) % self.pairs
            if not self.in_use(judge) and not self.in_use(judge + 1):
                return JobUser(
                    name=f"solboard-job (uid {judge + 1})", uid=judge, gid=judge + 1, child_uid=judge + 1
                )
        raise NoUidBlock(f"every uid pair of block {self.block.to_text()} still has a process")

    def uids(self) -> list[int]:
        return list(self.block.uids)
