"""The environment the harness sets for every rank of a multi-GPU job, and the check that the
submission left it as it was.

NVLink multicast (NVLS: the switch reduces and multicasts) stays off on the lent machines: the
harness sets the three switches below in every rank's environment, whatever the runner's, and a
rank whose environment no longer holds them after the import, a call or a timing is REJECTED. NCCL
and torch read them when a communicator or symmetric-memory rendezvous is created: the harness
creates its communicator before the submission is imported (``rank.join_group``), and a later one
the submission makes sees the values it finds then, which is what the check looks at. What this
cannot see is a submission that changes a value and restores it within one call, or calls
``cuMulticastCreate`` itself (docs/multigpu.md, "Not yet done").
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

#: Set by the harness in every rank; a submission that changes one is REJECTED.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
#: The ranks of one job talk over loopback (one host; the runner's jail has no other interface).
LOOPBACK = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def rank_environment() -> dict[str, str]:
    """What the harness sets over a child's minimal environment (``parent.child_env``)."""
    return {**MULTICAST_OFF, **LOOPBACK}


def _libc_getenv() -> ctypes._FuncPointer | None:
    try:
        getenv = ctypes.CDLL(None).getenv
    except (OSError, AttributeError):
        return None
    getenv.restype = ctypes.c_char_p
    getenv.argtypes = [ctypes.c_char_p]
    return getenv


@dataclass
class EnvironmentGuard:
    """The protected values as Python and the C library (what NCCL reads) see them."""

    expected: dict[str, str]

    def __post_init__(self) -> None:
        # Bound now, before the submission exists: a patched ctypes cannot hide a change from it.
        self._getenv = _libc_getenv()

    def _c_value(self, name: str) -> str | None:
        if self._getenv is None:
            return self.expected[name]
        raw = self._getenv(name.encode())
        return raw.decode(errors="replace") if raw is not None else None

    def changed(self) -> list[str]:
        """``NAME=value`` of every protected variable that no longer has the harness's value."""
        found = []
        for name, value in self.expected.items():
            seen = {os.environ.get(name), self._c_value(name)}
            if seen != {value}:
                shown = sorted(str(item) for item in seen if item != value)
                found.append(f"{name}={','.join(shown)}")
        return found

    def problem(self, stage: str) -> str | None:
        changed = self.changed()
        if not changed:
            return None
        return (f"changed the multicast-off environment the harness sets ({'; '.join(changed)}) during "
                f"{stage}: NVLink multicast must stay off")
