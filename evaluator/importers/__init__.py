"""Bring your own problems: convert problems written for other benchmarks into SOLboard's format.

    python -m evaluator import-problems --format {sol-execbench,reference-kernels} DIR [--out DIR]
    solboard manage import_problems --format ... DIR        (the same, then sync_problems)

``DIR`` is one problem (a folder with definition.json, or with task.yml) or a tree of them. Each
problem is converted into a folder of the catalogue's format under ``--out`` (default: the folder
of imported problems the catalogue reads, ``evaluator/problems/imported/``), validated like a
native problem (the same loader, then the CPU self-check of its baseline against its reference on
its CPU shapes, plus input and output checks), and written only when it passes. The report says,
per problem: converted, partially converted (what was dropped), unchanged, or refused (why).

Formats: ``sol_execbench.py`` and ``reference_kernels.py``; the imported problems' torch side:
``runtime.py``. docs/importing.md has the field-by-field mapping.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from evaluator.importers.common import CONVERTER_VERSION, Candidate, Refused

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
    shapes: int = 0
    version: int | None = None


@dataclass
class ImportReport:
    format: str
    source: str
    out: str
    dry_run: bool
    problems: list[ProblemOutcome] = field(default_factory=list)

    @property
    def written(self) -> list[ProblemOutcome]:
        return [item for item in self.problems if item.status in ("converted", "partial") and not self.dry_run]

    @property
    def refused(self) -> list[ProblemOutcome]:
        return [item for item in self.problems if item.status == "refused"]

    def to_dict(self) -> dict[str, Any]:
        counts = {status: sum(item.status == status for item in self.problems) for status in STATUS_TEXT}
        return {**asdict(self), "summary": counts}

    def lines(self) -> list[str]:
        lines = []
        for item in self.problems:
            label = STATUS_TEXT[item.status]
            head = f"{label:<20} {item.name or '-'}  <- {item.source}"
            if item.folder and item.status != "refused":
                head += f"  -> {item.folder}" + (" (dry run: not written)" if self.dry_run else "")
            lines.append(head)
            if item.status == "refused":  # what was dropped or noted before the refusal: in the JSON
                lines.append(f"    why: {item.reason}")
                continue
            lines += [f"    dropped: {text}" for text in item.dropped]
            lines += [f"    note: {text}" for text in item.notes]
        summary = self.to_dict()["summary"]
        parts = [f"{summary[status]} {STATUS_TEXT[status]}" for status in STATUS_TEXT if summary[status]]
        lines.append(f"{len(self.problems)} problem(s) from {self.format}: " + (", ".join(parts) or "none"))
        return lines


def _converter(fmt: str) -> Any:
    if fmt == "sol-execbench":
        from evaluator.importers import sol_execbench

        return sol_execbench
    if fmt == "reference-kernels":
        from evaluator.importers import reference_kernels

        return reference_kernels
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")


def default_out() -> Path:
    from evaluator.problems import imported_dir

    return imported_dir()


def discover(fmt: str, source: Path) -> list[Path]:
    return list(_converter(fmt).discover(source))


def import_problems(
    fmt: str,
    source: Path,
    out: Path | None = None,
    *,
    dry_run: bool = False,
    replace: bool = False,
    prefix: str = "",
    atol: float | None = None,
    rtol: float | None = None,
) -> ImportReport:
    """Convert every problem of ``fmt`` found at ``source`` into ``out`` (see the module docstring).

    Never raises for a problem that cannot be converted: it is reported as refused. Raises
    ValueError for an unknown format and FileNotFoundError when ``source`` does not exist."""
    converter = _converter(fmt)
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"no such folder: {source}")
    target = Path(out) if out is not None else default_out()
    report = ImportReport(format=fmt, source=str(source), out=str(target), dry_run=dry_run)
    taken: set[str] = set()
    for folder in converter.discover(source):
        report.problems.append(
            _import_one(converter, folder, target, taken, dry_run=dry_run, replace=replace, prefix=prefix,
                        atol=atol, rtol=rtol)
        )
    if report.written:
        from evaluator.problems import load_catalogue

        load_catalogue.cache_clear()
    return report


def _import_one(converter: Any, folder: Path, target: Path, taken: set[str], *, dry_run: bool, replace: bool,
                prefix: str, atol: float | None, rtol: float | None) -> ProblemOutcome:
    outcome = ProblemOutcome(source=str(folder), status="refused")
    with tempfile.TemporaryDirectory(prefix="solboard-import-") as scratch:
        work = Path(scratch) / "work"
        work.mkdir()
        try:
            candidate: Candidate = converter.convert(folder, work, prefix=prefix, atol=atol, rtol=rtol)
            outcome.name, outcome.dropped, outcome.notes = candidate.name, candidate.dropped, candidate.notes
            version, unchanged = _placement(candidate, target, taken, replace)
            taken.add(candidate.name)
            outcome.folder, outcome.version = str(target / candidate.name), version
            outcome.rankable, outcome.shapes = candidate.rankable, len(candidate.shapes)
            if unchanged:
                outcome.status = "unchanged"
                return outcome
            staged = Path(scratch) / candidate.name
            write_folder(candidate, staged, version)
            from evaluator.importers.validate import validate

            outcome.notes = outcome.notes + validate(staged)
        except Refused as error:
            outcome.reason = str(error)
            return outcome
        except (Exception, SystemExit) as error:  # noqa: BLE001 - upstream code fails in any way: reported
            outcome.reason = f"{type(error).__name__}: {error}"
            return outcome
        outcome.status = "partial" if candidate.dropped else "converted"
        if not dry_run:
            _install(staged, target / candidate.name)
    return outcome


def _placement(candidate: Candidate, target: Path, taken: set[str], replace: bool) -> tuple[int, bool]:
    """(version to write, whether an identical import is already there); Refused on a clash."""
    from evaluator.problems import CATALOGUE_DIR

    if (CATALOGUE_DIR / candidate.name / "problem.toml").exists() and target.resolve() != CATALOGUE_DIR:
        raise Refused(f"the name {candidate.name!r} is a native problem's; import with --prefix")
    if candidate.name in taken:
        raise Refused(f"another problem of this import is also named {candidate.name!r}; import it with --prefix")
    existing = target / candidate.name / "problem.toml"
    if not existing.exists():
        return 1, False
    try:
        meta = tomllib.loads(existing.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise Refused(f"{existing} exists and cannot be read ({error})") from error
    stored = meta.get("import", {})
    if not stored:
        raise Refused(f"{existing.parent} exists and is not an imported problem")
    if (stored.get("format"), stored.get("upstream_name")) != (candidate.format, candidate.upstream_name):
        raise Refused(f"{existing.parent} holds another problem ({stored.get('format')} "
                      f"{stored.get('upstream_name')}); import this one with --prefix")
    same = (
        stored.get("source_sha256") == candidate.source_digest
        and stored.get("converter_version") == CONVERTER_VERSION
        and stored.get("format") == candidate.format
    )
    if same:
        return int(meta.get("version", 1)), True
    if not replace:
        raise Refused(f"{existing.parent} exists with other content; import with --replace to replace it")
    return int(meta.get("version", 1)) + 1, False


def write_folder(candidate: Candidate, folder: Path, version: int) -> None:
    """The candidate as a catalogue folder (``folder``'s name must be the candidate's name)."""
    import json

    from evaluator.importers.common import render_counts, render_problem_toml, render_reference
    from evaluator.importers.runtime import ADAPTER_FILE

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "problem.toml").write_text(render_problem_toml(candidate, version))
    (folder / "counts.py").write_text(render_counts(candidate))
    (folder / "reference.py").write_text(render_reference(candidate))
    (folder / ADAPTER_FILE).write_text(json.dumps(candidate.adapter, indent=2) + "\n")
    for relative, text in candidate.files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


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


__all__ = ["FORMATS", "ImportReport", "ProblemOutcome", "Refused", "discover", "import_problems"]
