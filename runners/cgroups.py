"""One control group per job: a memory cap (no swap) and a process cap over all its processes.

The runner makes the group before the job starts (the jail's outer process joins it, so
everything the job starts is in it), reads how many times the kernel's OOM killer acted in it
after the job, and removes it. cgroup v2 where the machine has the memory and pids controllers
there (a sub-tree ``solboard/`` under the v2 root), else the v1 memory and pids hierarchies
(the group nested under the runner's own group there). Where neither can be written, there is
no group and the report's ``sandbox.gaps`` says why.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
TREE = "solboard"


class CgroupUnavailable(RuntimeError):
    pass


@dataclass
class JobGroup:
    version: int
    #: v2: one folder; v1: the memory group's and the pids group's.
    folders: list[Path]
    memory_bytes: int
    processes: int
    problems: list[str] = field(default_factory=list)

    @property
    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def oom_kills(self) -> int:
        """How many processes the OOM killer ended in this group (its memory cap was hit)."""
        if self.version == 2:
            text = _read(self.folders[0] / "memory.events")
        else:
            text = _read(self.folders[0] / "memory.oom_control")
        found = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(found.group(1)) if found else 0

    def describe(self) -> str:
        return (f"cgroup v{self.version}: at most {self.memory_bytes >> 20} MiB of memory, no swap, at most "
                f"{self.processes} processes and threads, for all the job's processes together")

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the group once its last process is gone (killed ones take a moment)."""
        deadline = time.monotonic() + wait_s
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.02)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _own_group(controller: str) -> str:
    """This process's group in the v1 hierarchy of ``controller`` ("" for v2's line)."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return ""


def _create_v2(slot: str, memory_bytes: int, processes: int) -> JobGroup:
    if not {"memory", "pids"} <= set(_read(ROOT / "cgroup.controllers").split()):
        raise CgroupUnavailable("cgroup v2 has no memory and pids controllers here")
    folder = ROOT
    for part in (TREE, slot):
        _write(folder / "cgroup.subtree_control", "+memory +pids")
        folder = folder / part
        folder.mkdir(exist_ok=True)
    _write(folder / "cgroup.subtree_control", "+memory +pids")
    job = folder / f"job-{secrets.token_hex(6)}"
    job.mkdir()
    _write(job / "memory.max", str(memory_bytes))
    _write(job / "memory.swap.max", "0")
    _write(job / "pids.max", str(processes))
    return JobGroup(2, [job], memory_bytes, processes)


def _create_v1(slot: str, memory_bytes: int, processes: int) -> JobGroup:
    name = f"job-{secrets.token_hex(6)}"
    folders = []
    for controller in ("memory", "pids"):
        hierarchy = ROOT / controller
        if not (hierarchy / "cgroup.procs").exists():
            raise CgroupUnavailable(f"no cgroup v1 {controller} hierarchy at {hierarchy}")
        parent = hierarchy / _own_group(controller).lstrip("/") / TREE / slot
        parent.mkdir(parents=True, exist_ok=True)
        (parent / name).mkdir()
        folders.append(parent / name)
    memory, pids = folders
    _write(memory / "memory.limit_in_bytes", str(memory_bytes))
    if (memory / "memory.memsw.limit_in_bytes").exists():
        _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))  # no swap beyond the cap
    _write(pids / "pids.max", str(processes))
    return JobGroup(1, folders, memory_bytes, processes)


def create(slot: str, memory_bytes: int, processes: int) -> JobGroup:
    """A fresh group for one job of ``slot``. Raises CgroupUnavailable with the reason."""
    if os.geteuid() != 0:
        raise CgroupUnavailable("the runner is not root")
    problems = []
    for make in (_create_v2, _create_v1):
        try:
            return make(slot, memory_bytes, processes)
        except (CgroupUnavailable, OSError) as error:
            problems.append(str(error))
    raise CgroupUnavailable("; ".join(problems))
