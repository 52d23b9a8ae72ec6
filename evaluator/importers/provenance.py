"""Where an imported problem came from, as ``[import] source`` records it: the upstream repository
and the path inside it (``github.com/gpu-mode/reference-kernels:problems/pmpp/vectoradd_py@f83cb92a``),
never a path of the machine that ran the import.

The repository is the one ``--source-repo`` names, else the ``origin`` remote of the git checkout
the folder is in (a URL, its scheme and ``.git`` dropped), else, for a folder outside any checkout
or with a local remote, the name of the folder the import was given; the path is relative to the
checkout's root (or to that folder) and the commit is the checkout's.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

_URL = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]+@)?(?P<host>[^/:]+)[:/](?P<path>.+?)(?:\.git)?/?$")


def repository_name(remote: str) -> str | None:
    """``https://github.com/o/r.git`` and ``git@github.com:o/r`` -> ``github.com/o/r``; None for a
    local path (a mirror on this machine says nothing to a reader elsewhere)."""
    if not remote or remote.startswith(("/", ".", "file:")):
        return None
    match = _URL.match(remote.strip())
    return f"{match['host']}/{match['path']}" if match else None


def _git(root: Path, *args: str) -> str:
    try:
        result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                                check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


@cache
def _checkout(folder: Path) -> tuple[Path, str, str] | None:
    """(root, origin remote, commit) of the git checkout holding ``folder``."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top:
        return None
    root = Path(top)
    return root, _git(root, "config", "--get", "remote.origin.url"), _git(root, "rev-parse", "HEAD")


def source_reference(folder: Path, import_root: Path, declared_repo: str | None = None) -> str:
    """``REPOSITORY:PATH[@COMMIT]`` of one problem folder (see the module docstring)."""
    folder, import_root = folder.resolve(), import_root.resolve()
    checkout = _checkout(folder)
    if checkout is not None:
        root, remote, commit = checkout
        repo = declared_repo or repository_name(remote) or root.name
        path = folder.relative_to(root).as_posix()
        return f"{repo}:{path}" + (f"@{commit[:12]}" if commit else "")
    base = import_root if import_root.is_dir() else import_root.parent
    path = folder.relative_to(base).as_posix() if folder == base or base in folder.parents else folder.name
    repo = declared_repo or base.name
    return f"{repo}:{path}" if path != "." else repo
