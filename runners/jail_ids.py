"""Who the job's processes are: the judge's user, the untrusted processes' user, their names.

Standard library only: ``runners/jail.py`` imports it in an isolated interpreter (``-I -S``).

A job has two uids of its own (``runners/identities.py`` hands out a fresh pair per job):

- the **judge** runs with real and saved uid J and effective uid C: ``(J, C, J)``;
- everything that runs submitted code (the child, the witness process, ncu, compilers) runs as
  ``(C, C, C)``.

The kernel lets a process signal, trace, ``prlimit`` or read the memory of another only when
their real or saved uids match (or all three, for tracing): a process of uid C can do none of it
to ``(J, C, J)``, while the judge, whose effective uid is C, still kills and inspects its child
and shares its GPU buffers with it (the NVIDIA driver's security token compares effective uids:
legacy CUDA IPC and ncu's profiling keep working as with one user). The judge's files are the
child's as before (one effective uid), which the judge never trusts anyway.

Getting there without a secure ``execve`` (ld.so's AT_SECURE mode drops TMPDIR and
LD_LIBRARY_PATH): the job process execs the judge as ``(J, J, J)`` holding only CAP_SETUID
(ambient; every other capability is out of its bounding set), and the judge's first act
(``evaluator/harness/identity.py``) is ``setresuid(-1, C, -1)`` and dropping that capability,
before it imports anything else or starts any process. The judge starts its untrusted processes
with ``user=C`` (unprivileged: C is its effective uid).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

CAP_SETUID = 7
PR_CAPBSET_DROP, PR_SET_KEEPCAPS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 24, 8, 47, 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: The judge reads the untrusted processes' uid here (and removes it from its environment).
CHILD_UID_VARIABLE = "SOLBOARD_CHILD_UID"
#: keyctl(2) and its KEYCTL_JOIN_SESSION_KEYRING on x86_64 / aarch64.
KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219}
KEYCTL_JOIN_SESSION_KEYRING = 1
JUDGE_NAME, CHILD_NAME = "solboard-judge", "solboard-job"

_libc = ctypes.CDLL(None, use_errno=True)


class IdentityError(RuntimeError):
    pass


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def set_capabilities(mask: int) -> None:
    """Effective, permitted and inheritable sets all ``mask`` (capabilities 0-63)."""
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)(_CapData(mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, mask & 0xFFFFFFFF),
                          _CapData(mask >> 32, mask >> 32, mask >> 32))
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise IdentityError(f"capset failed: {os.strerror(ctypes.get_errno())}")


def _prctl(option: int, *values: int) -> None:
    args = [ctypes.c_ulong(value) for value in values] + [ctypes.c_ulong(0)] * (4 - len(values))
    if _libc.prctl(option, *args) != 0:
        raise IdentityError(f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}")


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 40


def become(uid: int, gid: int, child_uid: int | None) -> None:
    """As root, in the forked job process: the job's gid, no supplementary groups, and either one
    uid for everything (``child_uid`` None) or the judge's ``(J, J, J)`` with CAP_SETUID alone,
    ambient so that it survives the ``execve`` (see the module's docstring)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    if child_uid is None:
        os.setresuid(uid, uid, uid)
    else:
        for capability in range(last_capability() + 1):
            if capability != CAP_SETUID:
                _prctl(PR_CAPBSET_DROP, capability)
        _prctl(PR_SET_KEEPCAPS, 1)
        os.setresuid(uid, uid, uid)
        _prctl(PR_SET_KEEPCAPS, 0)
        set_capabilities(1 << CAP_SETUID)
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETUID)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise IdentityError(f"the job's ids did not change: {os.getresuid()} {os.getresgid()}")


def fresh_session_keyring() -> bool:
    """Join a new, empty, anonymous session keyring (for init and everything it starts): nothing
    the runner's session holds is reachable. False where keyctl is not there."""
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    if number is None:
        return False
    return _libc.syscall(ctypes.c_long(number), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None) >= 0


def user_entries(config: dict[str, Any]) -> tuple[str, str]:
    """The lines /etc/passwd and /etc/group get inside the jail, so that the job's uids have names
    (getpass, ncu and compilers look them up) without touching the host's files."""
    uid, gid, child = config.get("uid"), config.get("gid"), config.get("child_uid")
    if uid is None or gid is None:
        return "", ""
    home = config["scratch"]
    users = [(CHILD_NAME if child is None else JUDGE_NAME, int(uid))]
    if child is not None:
        users.append((CHILD_NAME, int(child)))
    passwd = "".join(f"{name}:x:{number}:{gid}::{home}:/usr/sbin/nologin\n" for name, number in users)
    return passwd, f"{CHILD_NAME}:x:{gid}:\n"
