"""The judge's uids: out of reach of every process that runs submitted code.

A runner that is root starts the judge as its own user J holding only CAP_SETUID, with the uid C
of the job's untrusted processes in ``SOLBOARD_CHILD_UID`` (``runners/jail_ids.py``). The
judge's first act, before it imports anything else or starts any process, is
:func:`take_judge_identity`: real and saved uid J, effective uid C, no capability left. From then:

- every process the judge starts that runs or reads submitted code (the child, the ranks of a
  multi-GPU job, ncu and the witness process, nvcc and ptxas) gets ``user=C``
  (:func:`untrusted_process`): its three uids are C;
- such a process can neither signal nor trace nor ``prlimit`` the judge, nor read its memory:
  the kernel requires its real or saved uid to match the judge's (J) for each;
- the judge, whose effective uid is C, still signals, inspects and shares GPU memory with them
  (the NVIDIA driver's IPC and profiling checks compare effective uids).

Without the variable (no root runner, ``python -m evaluator`` by hand) nothing changes: one uid
for everything, and the report says so (``sandbox.judge_identity``).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

CHILD_UID_VARIABLE = "SOLBOARD_CHILD_UID"
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class IdentityError(RuntimeError):
    """The judge could not take its identity: it must not run a job without it."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_capabilities() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0))
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise IdentityError(f"capset failed: {os.strerror(ctypes.get_errno())}")


def _capabilities_left() -> list[str]:
    try:
        with open("/proc/self/status") as handle:
            rows = [line.split() for line in handle if line.startswith(("CapEff:", "CapPrm:", "CapAmb:"))]
    except OSError:
        return []
    return [f"{row[0]} {row[1]}" for row in rows if int(row[1], 16) != 0]


def take_judge_identity() -> int | None:
    """Become ``(J, C, J)`` with no capability when the runner asked for it; returns C (None when
    not asked). Raises IdentityError when it cannot: the job must not run without it."""
    value = os.environ.pop(CHILD_UID_VARIABLE, None)
    if not value:
        return None
    child = int(value)
    judge = os.getuid()
    try:
        os.setresuid(-1, child, -1)
        _drop_capabilities()
    except OSError as error:
        raise IdentityError(f"the judge could not take its uids: {error}") from None
    left = _capabilities_left()
    if os.getresuid() != (judge, child, judge) or left:
        raise IdentityError(f"the judge's uids are {os.getresuid()}, capabilities left: {left}")
    return child


def child_uid() -> int | None:
    """The untrusted processes' uid when the judge runs split (its effective uid), else None."""
    real, effective, _ = os.getresuid()
    return effective if real != effective else None


def untrusted_process() -> dict[str, Any]:
    """``subprocess.Popen`` arguments for a process that runs or reads submitted code."""
    uid = child_uid()
    return {} if uid is None else {"user": uid}


def describe() -> str:
    """The report's ``sandbox.judge_identity``."""
    real, effective, saved = os.getresuid()
    if real == effective:
        return (
            f"one uid ({real}) for the judge and the submission's processes: the child could signal its judge"
        )
    return (
        f"judge uids real {real} / effective {effective} / saved {saved}; the submission's processes run as "
        f"{effective} and can neither signal, trace nor read the judge"
    )
