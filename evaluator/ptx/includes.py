"""The include check and the scrubbing of nvcc's messages, both from what the compile really did.

nvcc runs its preprocessor (the host compiler in ``-E`` mode) with ``-H``: every file it opens is
printed as ``. path`` (one dot per nesting level), even when the compile fails half-way. That list,
not the source text, is checked: comments before ``#``, macros that build a path, ``#include_next``,
``#import``, line continuations or trigraphs all end up there, resolved. A file is accepted when it
lies in one of the CUDA toolkit's or the host compiler's include folders (``toolkit.py``), or is
the submission itself; anything else refuses the upload with the path the source asked for and
nothing of the file.

Messages that go back to the submitter keep only diagnostics located in ``submission.cu`` and the
nvcc driver's own lines; source excerpts and carets are dropped, and the host compiler is asked
not to print them (``#line 1 "/etc/passwd"`` followed by an error would make it quote that file).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.ptx.ptxas import Diagnostic
from evaluator.ptx.toolkit import include_folders

SOURCE_NAME = "submission.cu"
#: ``-H`` lists every opened header; no carets, so no line of another file is ever printed.
PREPROCESSOR_FLAGS = ["-Xcompiler", "-H,-fno-diagnostics-show-caret"]
_OPENED = re.compile(r"^\.+ (?P<path>.+)$")
_GUARD_HINT = "Multiple include guards may be useful for:"
_EDG = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\):\s*"
    r"(?P<sev>error|warning|catastrophic error)[^:]*:\s*(?P<msg>.*)$"
)
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)?\s*(?P<sev>fatal error|error|warning):\s*(?P<msg>.*)$"
)
_DRIVER = re.compile(r"^nvcc (?P<sev>error|fatal|warning)\s*:\s*(?P<msg>.*)$")


@dataclass
class Preprocessed:
    """nvcc's stderr split into the headers it opened and the rest of the log."""

    opened: list[str] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)


def split_opened_headers(stderr: str) -> Preprocessed:
    result = Preprocessed()
    in_guard_hint = False
    for line in stderr.splitlines():
        match = _OPENED.match(line)
        if match:
            result.opened.append(match.group("path"))
        elif line == _GUARD_HINT:
            in_guard_hint = True  # followed by a list of paths already seen above
        elif not (in_guard_hint and line in result.opened):
            in_guard_hint = False
            result.log_lines.append(line)
    return result


def refused_include(opened: list[str], workdir: Path) -> str | None:
    """The refusal for the first opened file outside the include folders, or None."""
    allowed = include_folders()
    submission = os.path.realpath(workdir / SOURCE_NAME)
    for path in dict.fromkeys(opened):
        resolved = os.path.realpath(workdir / path)  # an absolute path replaces workdir
        if resolved == submission or any(_inside(resolved, folder) for folder in allowed):
            continue
        shown = path.removeprefix(str(workdir) + "/")
        return (f"{SOURCE_NAME} includes {shown!r}, which is outside the CUDA toolkit's and the host "
                "compiler's include folders: only their headers (<cuda_bf16.h>, <cuda/barrier>, "
                "<stdint.h>, ...) may be included")
    return None


def _inside(path: str, folder: Path) -> bool:
    return path.startswith(str(folder).rstrip("/") + "/")


@dataclass
class Scrubbed:
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    hidden: int = 0  # diagnostics located in other files (headers): not shown

    def render(self) -> str:
        return "\n".join(d.render() for d in [*self.errors, *self.warnings])


def scrub_log(lines: list[str]) -> Scrubbed:
    """Diagnostics of the submission (with their line) and of the nvcc driver; nothing else."""
    scrubbed = Scrubbed()
    for raw in lines:
        line = raw.strip()
        located = _EDG.match(line) or _GCC.match(line)
        if located:
            _add_located(scrubbed, located)
            continue
        driver = _DRIVER.match(line)
        if driver:
            severity = "warning" if driver.group("sev") == "warning" else "error"
            _append(scrubbed, Diagnostic(severity, driver.group("msg").strip()))
    return scrubbed


def _add_located(scrubbed: Scrubbed, match: re.Match[str]) -> None:
    if match.group("file").strip() != SOURCE_NAME:
        scrubbed.hidden += 1
        return
    severity = "warning" if match.group("sev") == "warning" else "error"
    _append(scrubbed, Diagnostic(severity, match.group("msg").strip(), int(match.group("line"))))


def _append(scrubbed: Scrubbed, diagnostic: Diagnostic) -> None:
    (scrubbed.warnings if diagnostic.severity == "warning" else scrubbed.errors).append(diagnostic)
