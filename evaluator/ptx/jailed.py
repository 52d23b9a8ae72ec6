"""Running nvcc or ptxas on untrusted source: another process, jailed, limited, killed on time.

The caller (the site's upload path, ``check-ptx``, the runner's loader) never runs the compiler in
its own address space nor with its own view of the machine: :func:`run_jailed` starts the
trampoline ``tooljail.py`` in a new session, which (where the kernel allows it) builds a private
root holding only the toolchain, the include folders, /dev/null, a small /tmp and the compile
folder, with no network; sets CPU, memory, file-size and process limits; drops root to nobody;
and execs the tool. The caller waits at most ``wall_seconds``, then kills the whole process group.

Where namespaces are refused (no root and no user namespaces), the tool still runs in its own
process and session with the limits, the short environment and the wall-clock kill; the include
check (``includes.py``) is then what keeps host files out of the compile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Self

from evaluator.harness.identity import untrusted_process
from evaluator.ptx.errors import ToolchainError
from evaluator.ptx.toolkit import SYSTEM_FOLDERS, include_folders, real_tool, toolkit_root

log = logging.getLogger(__name__)
TRAMPOLINE = Path(__file__).with_name("tooljail.py")
EXIT_JAIL_FAILED = 125
_DIED = re.compile(r"died due to signal (\d+)")  # nvcc's words for a tool that was killed
# gcc's words for the same: "<strsignal> signal terminated program cc1plus"
_CPU_SIGNAL = re.compile(r"(CPU time limit exceeded|Killed) signal terminated program")
_FILE_SIGNAL = re.compile(r"File size limit exceeded signal terminated program")
_OUT_OF_MEMORY = re.compile(r"out of memory|bad_alloc|memory exhausted|cannot allocate memory", re.IGNORECASE)


@dataclass(frozen=True)
class ToolLimits:
    """Per tool run. Generous for real kernels (a CUTLASS/CuTe kernel compiles in well under a
    minute and 2 GiB); what goes past them is a source built to exhaust the compiler."""

    wall_seconds: float = 180.0
    cpu_seconds: int = 150
    address_space_bytes: int = 8 << 30
    file_bytes: int = 256 << 20
    tmp_bytes: int = 16 << 20
    processes: int = 64  # beyond those the user already runs

    def describe(self) -> str:
        return (f"wall {self.wall_seconds:g} s, CPU {self.cpu_seconds} s, address space "
                f"{self.address_space_bytes >> 20} MiB, files {self.file_bytes >> 20} MiB")


@dataclass(frozen=True)
class JailedResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    isolation: str  # "namespaces" or "rlimits"

    def limit_message(self, tool: str, limits: ToolLimits) -> str | None:
        """What limit the run hit, in words for the submitter; None when it hit none."""
        if self.timed_out:
            return f"{tool} ran past its time limit of {limits.wall_seconds:g} s and was stopped"
        signals = {-self.returncode} if self.returncode < 0 else set()
        signals |= {int(number) for number in _DIED.findall(self.stderr)}
        if signals & {signal.SIGXCPU, signal.SIGKILL} or _CPU_SIGNAL.search(self.stderr):
            return f"{tool} ran past its CPU time limit of {limits.cpu_seconds} s and was stopped"
        if signal.SIGXFSZ in signals or _FILE_SIGNAL.search(self.stderr):
            return (
                f"{tool} wrote a file larger than its limit of {limits.file_bytes >> 20} MiB and was stopped"
            )
        if self.returncode != 0 and _OUT_OF_MEMORY.search(self.stderr + self.stdout):
            return f"{tool} ran out of its memory limit of {limits.address_space_bytes >> 20} MiB"
        return None


class WorkFolder:
    """``<tmp>/solboard-<tool>-XXXX/{work,root}``: ``work`` is the only folder the tool may write,
    ``root`` the mount point of its private root. Removed on exit, whatever the tool left."""

    def __init__(self, prefix: str) -> None:
        self.base = Path(tempfile.mkdtemp(prefix=prefix))
        self.work = self.base / "work"
        self.root = self.base / "root"
        for folder in (self.work, self.work / "tmp", self.root):
            folder.mkdir()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def jail_view(tools: tuple[str, ...] = ("nvcc", "ptxas")) -> list[str]:
    """The host paths visible inside the jail, read-only; none nested in another."""
    extra = [toolkit_root(), *include_folders(), *(_tool_folder(tool) for tool in tools)]
    view = list(SYSTEM_FOLDERS)
    covered = [Path(path).resolve() for path in SYSTEM_FOLDERS if os.path.isdir(path)]
    for folder in (path for path in extra if path is not None):
        if not any(folder == top or top in folder.parents for top in covered):
            view.append(str(folder))
            covered.append(folder)
    return view


def _tool_folder(tool: str) -> Path | None:
    path = real_tool(tool)
    return path.parent if path is not None else None


def _environment(folder: WorkFolder, tool: Path) -> dict[str, str]:
    """Only what a compiler needs: none of the caller's variables (keys, database URLs) go in."""
    root = toolkit_root()
    path = [str(tool.parent), *([str(root / "bin")] if root else []), "/usr/bin", "/bin"]
    return {"PATH": os.pathsep.join(dict.fromkeys(path)), "HOME": str(folder.work),
            "TMPDIR": str(folder.work / "tmp"), "LC_ALL": "C"}


def _config(folder: WorkFolder, limits: ToolLimits, namespaces: bool) -> dict[str, object]:
    return {
        "namespaces": namespaces, "new_root": str(folder.root), "workdir": str(folder.work),
        "view": jail_view() if namespaces else [], "tmp_bytes": limits.tmp_bytes,
        "cpu_seconds": limits.cpu_seconds, "address_space_bytes": limits.address_space_bytes,
        "file_bytes": limits.file_bytes, "processes": limits.processes,
    }


def run_jailed(tool: str, args: list[str], folder: WorkFolder, limits: ToolLimits,
               namespaces: bool | None = None) -> JailedResult:
    """Run the CUDA tool ``tool`` (nvcc, ptxas) in ``folder.work``; see :func:`run_in_jail`."""
    executable = real_tool(tool)
    if executable is None:
        raise ToolchainError(f"{tool} not found on PATH nor in the nvidia wheels")
    return run_in_jail(executable, args, folder, limits, namespaces)


def run_in_jail(executable: Path, args: list[str], folder: WorkFolder, limits: ToolLimits,
                namespaces: bool | None = None) -> JailedResult:
    """Run ``executable args`` jailed; namespaces None: wherever this machine allows them."""
    use_namespaces = jail_namespaces() if namespaces is None else namespaces
    config = _config(folder, limits, use_namespaces)
    argv = [sys.executable, "-I", "-S", str(TRAMPOLINE), json.dumps(config), "--", str(executable), *args]
    result = _run(argv, folder, _environment(folder, executable), limits.wall_seconds)
    if result.returncode == EXIT_JAIL_FAILED and "solboard-tooljail:" in result.stderr:
        raise ToolchainError(
            f"the jail for {executable.name} could not be set up: {result.stderr.strip()[-500:]}"
        )
    isolation = "namespaces" if use_namespaces else "rlimits"
    return JailedResult(result.returncode, result.stdout, result.stderr, result.timed_out, isolation)


@dataclass(frozen=True)
class _Finished:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def _run(argv: list[str], folder: WorkFolder, env: dict[str, str], wall_seconds: float) -> _Finished:
    child = subprocess.Popen(
        argv, cwd=folder.work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, close_fds=True, **untrusted_process(),
    )
    timed_out = False
    try:
        out, err = child.communicate(timeout=wall_seconds)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(child.pid)
        out, err = child.communicate()
    _kill_group(child.pid)  # anything of the compile still alive in its group
    return _Finished(
        child.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out
    )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@cache
def jail_namespaces() -> bool:
    """Whether this machine lets the trampoline build the private root (tried once, for real)."""
    if not sys.platform.startswith("linux"):
        return False
    tool = real_tool("ptxas") or real_tool("nvcc")
    if tool is None:
        return False
    with WorkFolder("solboard-jailprobe-") as folder:
        config = _config(folder, ToolLimits(wall_seconds=60), namespaces=True)
        argv = [sys.executable, "-I", "-S", str(TRAMPOLINE), json.dumps(config), "--", str(tool), "--version"]
        result = _run(argv, folder, _environment(folder, tool), 60)
    if result.returncode == 0:
        return True
    log.warning("compiles run without namespaces (own process, limits and include check only): %s",
                result.stderr.strip()[-300:])
    return False
