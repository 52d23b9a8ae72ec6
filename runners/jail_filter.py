"""The job's seccomp filter: system calls no kernel, compiler or profiler needs, refused.

Built by libseccomp (the library's documented C interface, called through ctypes on the system's
``libseccomp.so.2``; no hand-written BPF), loaded by the jail in the job process just before its
``execve``, and inherited by everything the job starts: the judge, the child, the witness
process, ncu, compilers. A refused call fails with EPERM (ENOSYS for ``clone3``, so that glibc
falls back to ``clone``, whose flags the filter can read); the process goes on. A system call of
another architecture (the 32-bit ABI through ``int 0x80``) kills the process: libseccomp's
default for a foreign architecture.

Standard library only: ``runners/jail.py`` imports it in an isolated interpreter (``-I -S``).
What each refusal is for, and why nothing honest needs it, is ``REFUSED`` (docs/security.md
lists it). ncu profiles through the NVIDIA driver's own interface and its injection library
(no ptrace, no perf events); CUDA, Triton and Inductor fork and exec compilers and use ioctl,
mmap and sockets, none of which is refused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
from typing import Any

#: Refused system call -> why (kept in step with docs/security.md, section 3).
REFUSED: dict[str, str] = {
    # Kernel keyrings are per uid and outlive the job (the user and persistent keyrings): a job
    # could leave a secret there for the next job of the same uid.
    "add_key": "kernel keyrings outlive the job (per-uid state)",
    "request_key": "kernel keyrings outlive the job (per-uid state)",
    "keyctl": "kernel keyrings outlive the job (per-uid state)",
    # Reaching into another process: the judge runs under another real uid already; this is the
    # second wall, and no kernel, compiler or profiler of ours traces anything.
    "ptrace": "tracing another process (the judge, the witness)",
    "process_vm_readv": "reading another process's memory",
    "process_vm_writev": "writing another process's memory",
    "process_madvise": "acting on another process's memory",
    "kcmp": "comparing another process's kernel objects",
    # Kernel attack surface no kernel benchmark needs.
    "bpf": "eBPF programs and maps",
    "userfaultfd": "user page-fault handling (a classic exploit primitive)",
    "perf_event_open": "CPU performance counters (side channels); ncu does not use them",
    "io_uring_setup": "io_uring (large kernel attack surface)",
    "io_uring_enter": "io_uring (large kernel attack surface)",
    "io_uring_register": "io_uring (large kernel attack surface)",
    "fanotify_init": "file-system event monitoring of the host",
    "open_by_handle_at": "opening files by handle, around the mount view",
    # The file-system view is the jail's: no new mounts, roots or namespaces (a user namespace
    # would also count against a per-uid limit that outlives nothing, but is kernel surface).
    "mount": "changing the file-system view",
    "umount2": "changing the file-system view",
    "pivot_root": "changing the file-system view",
    "chroot": "changing the file-system view",
    "move_mount": "changing the file-system view",
    "open_tree": "changing the file-system view",
    "fsopen": "changing the file-system view",
    "fsconfig": "changing the file-system view",
    "fsmount": "changing the file-system view",
    "fspick": "changing the file-system view",
    "mount_setattr": "changing the file-system view",
    "unshare": "new namespaces (the jail made the job's own)",
    "setns": "entering other namespaces",
    # The machine itself.
    "kexec_load": "replacing the kernel",
    "kexec_file_load": "replacing the kernel",
    "init_module": "loading kernel modules",
    "finit_module": "loading kernel modules",
    "delete_module": "unloading kernel modules",
    "reboot": "rebooting the machine",
    "swapon": "swap devices",
    "swapoff": "swap devices",
    "acct": "process accounting",
    "quotactl": "disk quotas",
    "syslog": "the kernel log",
    "settimeofday": "the system clock (timings)",
    "clock_settime": "the system clock (timings)",
    "clock_adjtime": "the system clock (timings)",
    "adjtimex": "the system clock (timings)",
    "iopl": "I/O port access",
    "ioperm": "I/O port access",
}
#: ``clone`` flags that make a namespace: refused by a rule on the flags argument.
CLONE_NAMESPACE_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                         "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                         "CLONE_NEWNET": 0x40000000}

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def SCMP_ACT_ERRNO(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


class FilterUnavailable(RuntimeError):
    """libseccomp is missing or refused the filter (the report then lists it as a gap)."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _library() -> Any:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        library = ctypes.CDLL(name, use_errno=True)
    except OSError as error:
        raise FilterUnavailable(f"libseccomp not found ({error})") from None
    library.seccomp_init.restype = ctypes.c_void_p
    library.seccomp_init.argtypes = [ctypes.c_uint32]
    library.seccomp_release.argtypes = [ctypes.c_void_p]
    library.seccomp_load.argtypes = [ctypes.c_void_p]
    library.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    library.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgCmp)]
    return library


def _refuse(library: Any, context: int, name: str, action: int, compare: list[_ArgCmp] | None = None) -> bool:
    """Add one rule; False when this architecture has no such system call (nothing to refuse)."""
    number = library.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return False
    array = (_ArgCmp * len(compare))(*compare) if compare else None
    result = library.seccomp_rule_add_array(context, action, number, len(compare or ()), array)
    if result != 0:
        raise FilterUnavailable(
            f"libseccomp refused the rule for {name}: {errno.errorcode.get(-result, result)}"
        )
    return True


def load() -> list[str]:
    """Build the filter and load it into this process (for good: it is inherited and never
    lifted). Returns the refused calls this architecture has. Raises FilterUnavailable."""
    library = _library()
    context = library.seccomp_init(SCMP_ACT_ALLOW)
    if not context:
        raise FilterUnavailable("seccomp_init failed")
    try:
        refused = [name for name in REFUSED if _refuse(library, context, name, SCMP_ACT_ERRNO(errno.EPERM))]
        if _refuse(library, context, "clone3", SCMP_ACT_ERRNO(errno.ENOSYS)):
            refused.append("clone3 (ENOSYS: glibc falls back to clone)")
        for flag, bit in CLONE_NAMESPACE_FLAGS.items():
            rule = [_ArgCmp(0, SCMP_CMP_MASKED_EQ, bit, bit)]  # clone's flags are its first argument
            if _refuse(library, context, "clone", SCMP_ACT_ERRNO(errno.EPERM), rule):
                refused.append(f"clone with {flag}")
        result = library.seccomp_load(context)
        if result != 0:
            raise FilterUnavailable(f"seccomp_load failed: {errno.errorcode.get(-result, result)}")
    finally:
        library.seccomp_release(context)
    return refused
