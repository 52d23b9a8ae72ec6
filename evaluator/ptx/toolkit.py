"""Where the CUDA toolkit and the host compiler keep their programs and headers.

Two users: the compile jail (``jailed.py``) exposes exactly these folders to nvcc and ptxas, and
the include check (``includes.py``) accepts a header only when it lies inside one of the include
folders found here. Everything is asked of the tools themselves (``nvcc --dryrun`` names its
toolkit root and include flags, ``gcc -v`` its search list), so a toolkit from a pip wheel, from
/usr/local/cuda or from a distribution package is found the same way.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from evaluator.ptx.toolchain import find_tool

#: The distribution's read-only program and library folders: the host compiler (gcc, cc1plus,
#: as), the dynamic loader and its libraries. Nothing of the site lives there.
SYSTEM_FOLDERS = (
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/include",
    "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives",
)
_DRYRUN_VARIABLE = re.compile(r"^#\$ (?P<name>[A-Z_]+)=(?P<value>.*)$")


@cache
def nvcc_variables() -> dict[str, str]:
    """``TOP``, ``INCLUDES``, ``SYSTEM_INCLUDES``... as nvcc resolves them (empty without nvcc)."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        return {}
    done = subprocess.run(
        [str(nvcc), "--dryrun", "-ptx", "-x", "cu", os.devnull, "-o", os.devnull],
        check=False, capture_output=True, text=True, timeout=60,
    )
    found: dict[str, str] = {}
    for line in (done.stdout + done.stderr).splitlines():
        match = _DRYRUN_VARIABLE.match(line.strip())
        if match:
            found.setdefault(match.group("name"), match.group("value").strip())
    return found


@cache
def toolkit_root() -> Path | None:
    """The CUDA toolkit folder (bin/, nvvm/, include/, targets/), resolved."""
    top = nvcc_variables().get("TOP")
    if top:
        return Path(top).resolve()
    ptxas = find_tool("ptxas")
    return ptxas.resolve().parent.parent if ptxas is not None else None


def real_tool(name: str) -> Path | None:
    """The tool's own binary: a wrapper script on PATH (``exec /usr/local/cuda/bin/nvcc "$@"``)
    cannot run inside the jail, where only the toolkit folder is visible."""
    root = toolkit_root()
    if root is not None and os.access(root / "bin" / name, os.X_OK):
        return root / "bin" / name
    found = find_tool(name)
    return found.resolve() if found is not None else None


@cache
def toolkit_include_folders() -> tuple[Path, ...]:
    """``-I``/``-isystem`` folders nvcc adds (targets/<arch>/include, its cccl/), and include/."""
    variables = nvcc_variables()
    words = shlex.split(variables.get("INCLUDES", "") + " " + variables.get("SYSTEM_INCLUDES", ""))
    folders = [word[2:] for word in words if word.startswith("-I") and len(word) > 2]
    folders += [after for before, after in itertools.pairwise(words) if before == "-isystem"]
    root = toolkit_root()
    if root is not None:
        folders.append(str(root / "include"))
    return _existing(folders)


@cache
def host_compiler_include_folders() -> tuple[Path, ...]:
    """The host compiler's ``#include <...>`` search list (libstdc++, libc, its own intrinsics)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return ()
    done = subprocess.run(
        [compiler, "-xc++", "-E", "-v", "-"],
        input="",
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.splitlines()
    try:
        start = lines.index("#include <...> search starts here:") + 1
        end = lines.index("End of search list.", start)
    except ValueError:
        return ()
    return _existing(line.strip() for line in lines[start:end])


def include_folders() -> tuple[Path, ...]:
    """Every folder a submission's includes may come from."""
    return tuple(dict.fromkeys([*toolkit_include_folders(), *host_compiler_include_folders()]))


def _existing(paths: Iterable[str]) -> tuple[Path, ...]:
    found = [Path(path).resolve() for path in paths if path]
    return tuple(dict.fromkeys(path for path in found if path.is_dir()))
