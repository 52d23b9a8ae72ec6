"""The names an import gives its problems, decided before any conversion runs.

reference-kernels tasks are named ``<set>_<task>`` (``pmpp_vectoradd_py``, ``pmpp_v2_vectoradd_py``):
the same task name in two sets never clashes. A SOL-ExecBench problem is named after its
definition; when several folders of one import hold definitions of the same name (an example
copied into the test samples, the same kernel in three languages), the first keeps the name and
each other one gets the part of its path that tells it apart (``rmsnorm_h4096_triton``). After
conversion, a later one whose meaning equals the first one's is reported ``unchanged`` (the same
definition) rather than written twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from evaluator.importers.common import Refused, problem_name


def _base_name(fmt: str, folder: Path, prefix: str) -> str | None:
    try:
        if fmt == "reference-kernels":
            return problem_name(f"{folder.parent.name}_{folder.name}", prefix)
        definition = json.loads((folder / "definition.json").read_text())
        return problem_name(str(definition["name"]), prefix)
    except (OSError, ValueError, KeyError, TypeError, Refused):
        return None  # the converter refuses it with the reason


def _distinguishing(folder: Path, group: list[Path]) -> str:
    """The parts of ``folder``'s parents that the other folders of its group do not share."""
    common = set.intersection(*(set(other.parent.parts) for other in group))
    parts = [part for part in folder.parent.parts if part not in common] or [folder.name]
    return "_".join(parts)


def planned_names(fmt: str, folders: list[Path], prefix: str = "") -> list[tuple[str | None, str | None]]:
    """(name, group) per folder: the group is the name the definition asks for."""
    bases = [_base_name(fmt, folder, prefix) for folder in folders]
    planned: list[tuple[str | None, str | None]] = []
    for folder, base in zip(folders, bases, strict=False):
        group = [
            other
            for other, other_base in zip(folders, bases, strict=False)
            if base is not None and other_base == base
        ]
        if base is None or group[0] == folder:
            planned.append((base, base))
        else:
            planned.append((problem_name(f"{base}_{_distinguishing(folder, group)}"), base))
    return planned
