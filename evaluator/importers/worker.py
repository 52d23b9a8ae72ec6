"""One problem's import, as the bounded child process runs it (``bounded.py``): convert, place,
write to a staging folder, derive counts, validate. The parent installs what comes back.

Everything here may run upstream code, which can fail, loop or allocate in any way: the parent
holds the time and memory budget, and this module turns every failure into a refusal.
"""

from __future__ import annotations

import resource
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaluator.importers.common import (
    CONVERTER_VERSION,
    Candidate,
    Refused,
    assign_shape_ids,
    flag_shapes,
    meaning_digest,
)
from evaluator.problems import CATALOGUE_DIR as CATALOGUE_NATIVE


@dataclass
class Task:
    """What the parent hands the child for one source problem."""

    format: str
    folder: str
    root: str
    target: str
    scratch: str
    name: str | None = None
    prefix: str = ""
    atol: float | None = None
    rtol: float | None = None
    replace: bool = False
    source_repo: str | None = None
    #: The meaning digest of the first problem of the same name in this import, when known: a
    #: problem that means the same is not validated again (the parent reports it unchanged).
    same_as: str | None = None


@dataclass
class Result:
    """What the child hands back (JSON-ready)."""

    source: str
    status: str = "refused"
    name: str | None = None
    reason: str | None = None
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rankable: bool = False
    counts: str = "missing"
    shapes: int = 0
    version: int | None = None
    digest: str = ""
    staged: str | None = None
    #: CPU seconds the child used (user + system): what the import costs whatever else the machine runs.
    cpu_seconds: float = 0.0


def converter(fmt: str) -> Any:
    if fmt == "sol-execbench":
        from evaluator.importers import sol_execbench

        return sol_execbench
    if fmt == "reference-kernels":
        from evaluator.importers import reference_kernels

        return reference_kernels
    raise ValueError(f"unknown format {fmt!r}")


def run(task: Task) -> dict[str, Any]:
    """The import of ``task`` as a Result dict; never raises for the problem's own failures."""
    from evaluator.importers.provenance import source_reference

    folder = Path(task.folder)
    result = Result(source=source_reference(folder, Path(task.root), task.source_repo))
    try:
        _import(task, folder, result)
    except Refused as error:
        result.reason = str(error)
    except MemoryError:
        result.reason = "ran out of memory (the import's memory budget, --memory-budget)"
    except (Exception, SystemExit) as error:  # upstream code fails in any way: reported
        result.reason = f"{type(error).__name__}: {error}"
    if result.reason is not None:
        result.status = "refused"
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_seconds = usage.ru_utime + usage.ru_stime
    return asdict(result)


def _import(task: Task, folder: Path, result: Result) -> None:
    from evaluator.importers.provenance import source_reference

    work = Path(task.scratch) / "work"
    work.mkdir(parents=True, exist_ok=True)
    candidate: Candidate = converter(task.format).convert(folder, work, prefix=task.prefix, atol=task.atol,
                                                          rtol=task.rtol)
    if task.name:
        candidate.name = task.name
    candidate.provenance = result.source = source_reference(folder, Path(task.root), task.source_repo)
    assign_shape_ids(candidate.shapes, candidate.axes)
    flag_shapes(candidate)
    _declare_native_table(candidate)
    candidate.source_digest = meaning_digest(candidate)
    result.name, result.digest, result.dropped, result.notes = (candidate.name, candidate.source_digest,
                                                                candidate.dropped, candidate.notes)
    if task.same_as == candidate.source_digest:
        result.status = "unchanged"
        return
    version, unchanged = placement(candidate, Path(task.target), task.replace)
    result.version, result.shapes = version, len(candidate.shapes)
    if unchanged:
        result.status = "unchanged"
        return
    staged = Path(task.scratch) / candidate.name
    _write_validated(candidate, staged, version)
    result.dropped, result.notes = candidate.dropped, candidate.notes
    result.rankable, result.counts, result.staged = candidate.rankable, candidate.counts_mode, str(staged)
    result.status = "partial" if candidate.dropped else "converted"


def _declare_native_table(candidate: Candidate) -> None:
    """The [ptx] table native kernels get (or Python only, and why), in the report's notes."""
    from evaluator.importers.native_table import describe_table, native_table

    native = native_table(candidate)
    candidate.ptx, candidate.languages = native.table, native.languages
    candidate.notes += [describe_table(native), *native.notes]


def _write_validated(candidate: Candidate, staged: Path, version: int) -> None:
    from evaluator.importers.render import write_folder
    from evaluator.importers.validate import check_counts, check_cpu, check_shapes, load

    derive = candidate.counts_source is None
    write_folder(candidate, staged, version)
    checked = check_shapes(staged, derive)
    if candidate.gpu_only is None:
        if _lighter_cpu_shapes(candidate, checked, load(staged)):
            write_folder(candidate, staged, version)
        check_cpu(staged, checked)
    elif len(checked.underived) == len(candidate.shapes):
        raise Refused(
            f"no shape can be checked here: {candidate.gpu_only}, and fake tensors cannot follow its "
            "reference (its work depends on values)"
        )
    candidate.notes += checked.notes
    widened = checked.shortfall is not None
    if widened:
        _widen_tolerance(candidate, checked.shortfall)
    if derive:
        _adopt_derived(candidate, checked)
    if derive or widened:
        write_folder(candidate, staged, version)
    check_counts(load(staged))


def _widen_tolerance(candidate: Candidate, shortfall: Any) -> None:
    """Every tolerance of the problem (its own, per output, per shape) widened as the float64
    measurement asks (``independent.widening``: atol alone, or atol and rtol; Refused when nothing
    helps); upstream's figures stay in ``candidate.widened`` and the description says why
    (docs/importing.md)."""
    from evaluator.importers.independent import SAFETY_FACTOR, widening

    factors = widening(shortfall)

    def scaled(table: dict[str, float]) -> dict[str, float]:
        return {
            key: (float(f"{value * factors[key]:.3g}") if key in factors else value)
            for key, value in table.items()
        }

    upstream = dict(candidate.tolerance)
    candidate.tolerance = scaled(candidate.tolerance)
    candidate.output_tolerances = {name: scaled(table) for name, table in candidate.output_tolerances.items()}
    for shape in candidate.shapes:
        if shape.get("tolerance"):
            shape["tolerance"] = scaled(shape["tolerance"])
    if factors["rtol"] == 1.0:
        how = (f"Every atol here is upstream's x{factors['atol']:.3g} (the least factor that passes, "
               f"{shortfall.need_atol:.3g}, times a safety factor of {SAFETY_FACTOR:g}); rtol is upstream's")
    else:
        how = (
            f"Every atol and rtol here is upstream's x{factors['atol']:.3g} (the least factor that passes, "
            f"{shortfall.need:.3g}, times a safety factor of {SAFETY_FACTOR:g})"
        )
    why = (
        f"upstream's tolerance (atol {upstream['atol']:g}, rtol {upstream['rtol']:g}, matched ratio "
        f"{upstream['matched_ratio']:g}) is tighter than the reference's own rounding: "
        f"{shortfall.text()}. {how}"
    )
    candidate.widened = {"factors": factors, "upstream": upstream, "why": why}
    candidate.description = f"{candidate.description}\n\nTolerance widened at import: {why}."
    candidate.notes.append(f"tolerance widened: {why}")


def _shape_flops(problem: Any, checked: Any) -> dict[str, float]:
    """Total flops per shape id: derived at this import, else from the given counts.py."""
    if checked.derived:
        return {key: sum(row["flops"].values()) for key, row in checked.derived.items()}
    totals = {shape.shape_id: _total_flops(problem, shape) for shape in problem.shapes}
    return {key: value for key, value in totals.items() if value is not None}


def _total_flops(problem: Any, shape: Any) -> float | None:
    try:
        return float(problem.counts(dict(shape.axes)).total_flops)
    except Exception:  # check_counts reports a broken counts.py
        return None


def _lighter_cpu_shapes(candidate: Candidate, checked: Any, problem: Any) -> bool:
    """Move the ``cpu`` flags to shapes of at most CPU_FLOPS_MAX flops when the flagged ones
    compute more (the bytes chose them); True when the flags changed."""
    from evaluator.importers.common import CPU_FLOPS_MAX, CPU_SHAPE_MAX_BYTES, declared_bytes

    flops = _shape_flops(problem, checked)
    flagged = [shape for shape in candidate.shapes if shape.get("cpu")]
    if all(flops.get(str(shape["id"]), 0.0) <= CPU_FLOPS_MAX for shape in flagged):
        return False
    tensors = candidate.inputs + candidate.outputs
    light = sorted((flops[str(shape["id"])], index) for index, shape in enumerate(candidate.shapes)
                   if str(shape["id"]) in flops and flops[str(shape["id"])] <= CPU_FLOPS_MAX
                   and declared_bytes(tensors, {a: shape[a] for a in candidate.axes}) <= CPU_SHAPE_MAX_BYTES)
    if not light:
        candidate.notes.append(
            f"the CPU shapes compute more than {CPU_FLOPS_MAX:.0e} flops: the CPU checks are slow"
        )
        return False
    chosen = {index for _, index in light[:2]}
    for index, shape in enumerate(candidate.shapes):
        shape["cpu"] = index in chosen
        if index in chosen:
            shape["quick"] = False
    candidate.notes.append(
        "CPU shapes chosen by flops (the smallest in bytes compute too much for the CPU checks)"
    )
    return True


def _adopt_derived(candidate: Candidate, checked: Any) -> None:
    candidate.derived = checked.derived or None
    for shape_id, why in checked.underived.items():
        if any(shape.get("ranked") and shape.get("id") == shape_id for shape in candidate.shapes):
            candidate.dropped.append(f"ranking at {shape_id}: no counts ({why}): unranked")
    if checked.masked_attention:
        candidate.notes.append("derived counts: attention with a mask tensor is counted in full at "
                               f"{', '.join(checked.masked_attention)} (a kernel may skip masked blocks)")
    if candidate.derived:
        candidate.notes.append(
            "counts derived from the reference (flops by class, compulsory bytes): rankable"
        )
    else:
        candidate.dropped.append(
            "ranking: counts missing and not derivable: not rankable (every shape is unranked)"
        )


def placement(candidate: Candidate, target: Path, replace: bool) -> tuple[int, bool]:
    """(version to write, whether an identical import is already there); Refused on a clash."""
    if (CATALOGUE_NATIVE / candidate.name / "problem.toml").exists() and target.resolve() != CATALOGUE_NATIVE:
        raise Refused(f"the name {candidate.name!r} is a native problem's; import with --prefix")
    existing = target / candidate.name / "problem.toml"
    if not existing.exists():
        return 1, False
    try:
        meta = tomllib.loads(existing.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise Refused(f"{existing} exists and cannot be read ({error})") from error
    stored = meta.get("import", {})
    if not stored:
        raise Refused(f"{existing.parent.name} exists and is not an imported problem")
    if (stored.get("format"), stored.get("upstream_name")) != (candidate.format, candidate.upstream_name):
        raise Refused(f"{existing.parent.name} holds another problem ({stored.get('format')} "
                      f"{stored.get('upstream_name')}); import this one with --prefix")
    if (
        stored.get("source_sha256") == candidate.source_digest
        and stored.get("converter_version") == CONVERTER_VERSION
    ):
        return int(meta.get("version", 1)), True
    if not replace:
        raise Refused(
            f"{existing.parent.name} exists with another meaning; import with --replace to replace it"
        )
    return int(meta.get("version", 1)) + 1, False
