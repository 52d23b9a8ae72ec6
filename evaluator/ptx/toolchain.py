"""Finding the CUDA command-line tools: PATH first, then the pip wheels' ``nvidia/cu13/bin``.

``cuobjdump --dump-sass`` runs ``nvdisasm`` itself, so the folder holding nvdisasm goes first on
the PATH of every subprocess started through :func:`run_tool`.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from evaluator.ptx.errors import ToolchainError

TOOLS = ("ptxas", "nvcc", "cuobjdump", "nvdisasm")


def _wheel_bin_dirs() -> list[Path]:
    roots = [Path(p) for p in site.getsitepackages()] + [Path(site.getusersitepackages())]
    roots += [Path(p) for p in sys.path if p.endswith("site-packages")]
    found = []
    for root in roots:
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin", "nvidia/cu12/bin"):
            folder = root / sub
            if folder.is_dir() and folder not in found:
                found.append(folder)
    return found


@cache
def find_tool(name: str) -> Path | None:
    """Absolute path of a CUDA tool, or None when neither PATH nor a wheel has it."""
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    for folder in _wheel_bin_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_tool(name: str) -> Path:
    path = find_tool(name)
    if path is None:
        raise ToolchainError(
            f"{name} not found on PATH nor in the nvidia wheels (pip install nvidia-cuda-nvcc "
            "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
        )
    return path


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    folders = [str(p.parent) for p in (find_tool("nvdisasm"), find_tool("ptxas")) if p is not None]
    env["PATH"] = os.pathsep.join([*folders, env.get("PATH", "")])
    return env


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: str
    stderr: str


def run_tool(name: str, args: list[str], cwd: Path, timeout_s: float = 120.0) -> ToolResult:
    """Run a CUDA tool without a shell; a tool that overruns its time becomes a ToolchainError."""
    command = [str(require_tool(name)), *args]
    try:
        done = subprocess.run(
            command, check=False, cwd=cwd, env=_tool_env(), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as error:
        raise ToolchainError(f"{name} ran longer than {timeout_s:.0f} s") from error
    return ToolResult(done.returncode, done.stdout, done.stderr)


@cache
def tool_versions() -> dict[str, str]:
    """One line per tool found, for reports and `check-ptx`."""
    versions = {}
    for name in ("ptxas", "nvcc", "cuobjdump"):
        path = find_tool(name)
        if path is None:
            continue
        out = subprocess.run(
            [str(path), "--version"], check=False, capture_output=True, text=True, timeout=30
        )
        lines = [line for line in out.stdout.splitlines() if "release" in line or "V1" in line]
        versions[name] = lines[-1].strip() if lines else "unknown"
    return versions
