"""Bring your own problems: convert problems written for other benchmarks into SOLboard's format.

    python -m evaluator import-problems --format {sol-execbench,reference-kernels} DIR [--out DIR]
    solboard manage import_problems --format ... DIR        (the same, then sync_problems)

``DIR`` is one problem (a folder with definition.json, or with task.yml) or a tree of them. Each
problem is converted in a child process with a time and memory budget (``bounded.py``), into a
folder of the catalogue's format under ``--out`` (default: the folder of imported problems the
catalogue reads, ``evaluator/problems/imported/``), with counts derived from its reference when
the source gives none (``derived_counts.py``), validated like a native problem (``validate.py``),
and written only when it passes. The report says, per problem and as each one finishes:
converted, partially converted (what was dropped), unchanged, or refused (why).

Formats: ``sol_execbench.py`` and ``reference_kernels.py``; the imported problems' torch side:
``runtime.py``; their users' own submissions: ``foreign.py``. docs/importing.md has the
field-by-field mapping.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from evaluator.importers.common import Refused

FORMATS = ("sol-execbench", "reference-kernels")
Status = Literal["converted", "partial", "unchanged", "refused"]
STATUS_TEXT = {"converted": "converted", "partial": "partially converted", "unchanged": "unchanged",
               "refused": "refused"}


@dataclass
class ProblemOutcome:
    """What happened to one source problem."""

    source: str
    status: Status
    name: str | None = None
    folder: str | None = None
    reason: str | None = None  # refused: why
    dropped: list[str] = field(default_factory=list)  # partial: what was left out
    notes: list[str] = field(default_factory=list)  # differences that lose nothing
    rankable: bool = False
    counts: str = "missing"  # provided, derived or missing
    shapes: int = 0
    version: int | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def lines(self, dry_run: bool = False) -> list[str]:
        head = f"{STATUS_TEXT[self.status]:<20} {self.name or '-'}  <- {self.source}  ({self.seconds:.1f} s)"
        if self.folder and self.status in ("converted", "partial"):
            head += f"  -> {self.folder}" + (" (dry run: not written)" if dry_run else "")
        if self.status == "refused":
            return [head, f"    why: {self.reason}"]
        lines = [head] + ([f"    counts: {self.counts}"] if self.status != "unchanged" else [])
        lines += [f"    dropped: {text}" for text in self.dropped]
        return lines + [f"    note: {text}" for text in self.notes]


@dataclass
class ImportReport:
    format: str
    source: str
    out: str
    dry_run: bool
    problems: list[ProblemOutcome] = field(default_factory=list)

    @property
    def written(self) -> list[ProblemOutcome]:
        return [
            item for item in self.problems if item.status in ("converted", "partial") and not self.dry_run
        ]

    @property
    def refused(self) -> list[ProblemOutcome]:
        return [item for item in self.problems if item.status == "refused"]

    def to_dict(self) -> dict[str, Any]:
        counts = {status: sum(item.status == status for item in self.problems) for status in STATUS_TEXT}
        return {**asdict(self), "summary": counts}

    def summary_line(self) -> str:
        summary = self.to_dict()["summary"]
        parts = [f"{summary[status]} {STATUS_TEXT[status]}" for status in STATUS_TEXT if summary[status]]
        seconds = sum(item.seconds for item in self.problems)
        cpu = sum(item.cpu_seconds for item in self.problems)
        return f"{len(self.problems)} problem(s) from {self.format}: " + (", ".join(parts) or "none") + \
            f" ({seconds:.0f} s of import processes, {cpu:.0f} CPU s)"

    def lines(self) -> list[str]:
        lines = [line for item in self.problems for line in item.lines(self.dry_run)]
        return lines + [self.summary_line()]


@dataclass(frozen=True)
class Options:
    """How to import (the CLI's options)."""

    dry_run: bool = False
    replace: bool = False
    prefix: str = ""
    atol: float | None = None
    rtol: float | None = None
    source_repo: str | None = None
    time_budget_s: float | None = None
    memory_budget_mib: int | None = None
    jobs: int = 1


def _converter(fmt: str) -> Any:
    from evaluator.importers.worker import converter

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return converter(fmt)


def default_out() -> Path:
    from evaluator.problems import imported_dir

    return imported_dir()


def discover(fmt: str, source: Path) -> list[Path]:
    return list(_converter(fmt).discover(source))


def import_problems(
    fmt: str,
    source: Path,
    out: Path | None = None,
    options: Options | None = None,
    progress: Callable[[ProblemOutcome, int, int], None] | None = None,
    **legacy: Any,
) -> ImportReport:
    """Convert every problem of ``fmt`` found at ``source`` into ``out`` (see the module docstring);
    ``progress(outcome, done, total)`` is called as each problem finishes.

    Never raises for a problem that cannot be converted: it is reported as refused. Raises
    ValueError for an unknown format and FileNotFoundError when ``source`` does not exist."""
    options = options or Options(**legacy)
    if not Path(source).exists():
        raise FileNotFoundError(f"no such folder: {source}")
    folders = discover(fmt, Path(source))
    target = Path(out) if out is not None else default_out()
    report = ImportReport(format=fmt, source=str(source), out=str(target), dry_run=options.dry_run)
    with tempfile.TemporaryDirectory(prefix="solboard-import-") as scratch:
        report.problems = _run(fmt, Path(source), folders, target, Path(scratch), options, progress)
    if report.written:
        from evaluator.problems import load_catalogue

        load_catalogue.cache_clear()
    return report


def _run(fmt: str, source: Path, folders: list[Path], target: Path, scratch: Path, options: Options,
         progress: Callable[[ProblemOutcome, int, int], None] | None) -> list[ProblemOutcome]:
    """Every folder through a bounded child; outcomes settled (and reported) in discovery order,
    each as soon as it and every folder before it are done."""
    from evaluator.importers.bounded import Budget, run_bounded
    from evaluator.importers.naming import planned_names
    from evaluator.importers.worker import Task

    planned = planned_names(fmt, folders, options.prefix)
    tasks = [
        Task(
            format=fmt,
            folder=str(folder),
            root=str(source),
            target=str(target),
            scratch=str(scratch / str(i)),
            name=planned[i][0],
            prefix=options.prefix,
            atol=options.atol,
            rtol=options.rtol,
            replace=options.replace,
            source_repo=options.source_repo,
        )
        for i, folder in enumerate(folders)
    ]
    budget = Budget(
        options.time_budget_s or Budget().seconds, options.memory_budget_mib or Budget().memory_mib
    )
    results: dict[int, tuple[dict[str, Any], float]] = {}
    outcomes: list[ProblemOutcome] = []
    firsts: dict[str, tuple[str, str]] = {}  # group -> (digest, source) of its first problem
    def known(index: int, task: Any) -> Any:
        group = planned[index][1]
        return replace(task, same_as=firsts[group][0]) if group in firsts else task

    for index, result, seconds in run_bounded(tasks, budget, options.jobs, known):
        results[index] = (result, seconds)
        while len(outcomes) in results:
            result, seconds = results.pop(len(outcomes))
            outcome = _settle(result, seconds, planned[len(outcomes)][1], target, firsts, options.dry_run)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome, len(outcomes), len(tasks))
    return outcomes


def _settle(result: dict[str, Any], seconds: float, group: str | None, target: Path,
            firsts: dict[str, tuple[str, str]], dry_run: bool) -> ProblemOutcome:
    """The outcome of one child's result: a problem whose meaning equals the first of its name in
    this import is ``unchanged`` (the same definition); a converted one is installed (unless a dry run)."""
    staged = result.pop("staged", None)
    digest = result.pop("digest", "")
    outcome = ProblemOutcome(**result, seconds=seconds)
    if outcome.status not in ("converted", "partial", "unchanged") or not outcome.name:
        return outcome
    outcome.folder = str(target / outcome.name)
    if group is not None:
        first = firsts.setdefault(group, (digest, outcome.source))
        if first[1] != outcome.source and first[0] == digest:
            outcome.status, outcome.folder = "unchanged", None
            outcome.notes = [f"the same definition as {first[1]}: not written twice"]
            return outcome
    if outcome.status in ("converted", "partial") and staged and not dry_run:
        _install(Path(staged), target / outcome.name)
    return outcome


def _install(staged: Path, final: Path) -> None:
    """Move the validated folder into place; a previous import of it is replaced as a whole. The
    copy is made in ``.staging/`` next to it (one level down, where the catalogue does not look)."""
    staging = final.parent / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    incoming, retired = staging / final.name, staging / f"{final.name}.replaced"
    for leftover in (incoming, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
    shutil.copytree(staged, incoming, ignore=shutil.ignore_patterns("__pycache__"))
    if final.exists():
        final.rename(retired)
    incoming.rename(final)
    if retired.exists():
        shutil.rmtree(retired)
    if not any(staging.iterdir()):
        staging.rmdir()


def as_json(report: ImportReport) -> str:
    return json.dumps(report.to_dict(), indent=2)


__all__ = ["FORMATS", "ImportReport", "Options", "ProblemOutcome", "Refused", "discover", "import_problems"]
