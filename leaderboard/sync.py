"""Mirror the evaluator's data files into the database: the problem catalogue and the GPU table.

Both syncs are idempotent: a second run with nothing changed writes nothing. Nothing that has
results is ever deleted: a problem or a shape that left the catalogue is marked inactive.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluator.gpu_specs import GpuSpec, load_gpu_specs
from evaluator.problems import Problem as CatalogueProblem
from evaluator.problems import load_catalogue
from leaderboard.models import GpuType, Problem, Shape

#: Files whose content defines what the database mirrors (reference.py is torch-side only).
FINGERPRINT_FILES = ("problem.toml", "counts.py")


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    not_synced: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deactivated)

    def lines(self) -> list[str]:
        parts = [f"{label}: {', '.join(names)}" for label, names in self._groups() if names]
        return parts + [f"warning: {warning}" for warning in self.warnings]

    def _groups(self) -> list[tuple[str, list[str]]]:
        return [("created", self.created), ("updated", self.updated),
                ("unchanged", self.unchanged), ("deactivated", self.deactivated),
                ("not synced", self.not_synced)]


# ---------------------------------------------------------------- problems


def fingerprint(problem: CatalogueProblem) -> str:
    digest = hashlib.sha256()
    for name in FINGERPRINT_FILES:
        path = problem.folder / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()


def sync_problems(catalogue: dict[str, CatalogueProblem] | None = None) -> SyncReport:
    catalogue = load_catalogue() if catalogue is None else catalogue
    report = SyncReport()
    for problem in catalogue.values():
        try:
            _sync_problem(problem, report)
        except Exception as error:
            # One broken folder (an import that wrote counts for some of its shapes only) must not
            # stop every other problem's sync, nor `make run`, which syncs before it starts anything.
            # Its rows roll back with its transaction and stay as they were.
            report.not_synced.append(problem.name)
            report.warnings.append(f"{problem.name} not synced: {type(error).__name__}: {error}")
    gone = Problem.objects.filter(active=True).exclude(name__in=list(catalogue))
    for row in gone:
        row.active = False
        row.save(update_fields=["active"])
        report.deactivated.append(row.name)
    return report


def _sync_problem(problem: CatalogueProblem, report: SyncReport) -> None:
    digest = fingerprint(problem)
    row = Problem.objects.filter(name=problem.name).first()
    if row is not None and _up_to_date(row, problem, digest):
        report.unchanged.append(problem.name)
        return
    if row is not None:
        _warn_about_version(row, problem, digest, report)
    with transaction.atomic():
        values = {**_problem_values(problem), "catalogue_sha256": digest, "synced_at": timezone.now()}
        row, created = Problem.objects.update_or_create(name=problem.name, defaults=values)
        _sync_shapes(row, problem)
    (report.created if created else report.updated).append(problem.name)


def _up_to_date(row: Problem, problem: CatalogueProblem, digest: str) -> bool:
    if not row.active or row.version != problem.version or row.catalogue_sha256 != digest:
        return False
    active_ids = set(row.shapes.filter(active=True).values_list("shape_id", flat=True))
    return active_ids == {shape.shape_id for shape in problem.shapes}


def _warn_about_version(row: Problem, problem: CatalogueProblem, digest: str, report: SyncReport) -> None:
    if row.catalogue_sha256 != digest and row.version == problem.version:
        report.warnings.append(
            f"{problem.name}: content changed without a version bump (still v{row.version})"
        )
    if problem.version < row.version:
        report.warnings.append(
            f"{problem.name}: catalogue v{problem.version} is older than stored v{row.version}"
        )


def _problem_values(problem: CatalogueProblem) -> dict[str, Any]:
    ptx = dict(problem.ptx)
    required = ptx.pop("required_features", {})
    return {
        "title": problem.title,
        "description": problem.description,
        "kind": problem.kind,
        "world_size": problem.world_size,
        "axes": list(problem.axes),
        "languages": list(problem.languages),
        "tolerance": {"atol": problem.atol, "rtol": problem.rtol, "matched_ratio": problem.matched_ratio},
        "inputs": [_tensor(spec) for spec in problem.inputs],
        "outputs": [_tensor(spec) for spec in problem.outputs],
        "distributions": list(problem.distributions),
        "baseline_name": problem.baseline_name,
        "ptx_abi": ptx,
        "required_features": required,
        "version": problem.version,
        "active": True,
    }


def _tensor(spec: Any) -> dict[str, Any]:
    return {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype, "layout": spec.layout}


def _sync_shapes(row: Problem, problem: CatalogueProblem) -> None:
    existing = {shape.shape_id: shape for shape in row.shapes.all()}
    for position, shape in enumerate(problem.shapes):
        counts = problem.counts(shape.axes)
        values = {
            "axes": dict(shape.axes), "ranked": shape.ranked, "quick": shape.quick, "cpu": shape.cpu,
            "position": position, "active": True,
            "counts": {"flops": dict(counts.flops), "bytes": counts.bytes, "comm_bytes": counts.comm_bytes,
                       **({"estimated": True} if counts.estimated else {})},
        }
        stored = existing.pop(shape.shape_id, None)
        if stored is None:
            Shape.objects.create(problem=row, shape_id=shape.shape_id, **values)
        elif any(getattr(stored, name) != value for name, value in values.items()):
            Shape.objects.filter(pk=stored.pk).update(**values)
    for leftover in existing.values():
        _retire_shape(leftover)


def _retire_shape(shape: Shape) -> None:
    """A shape gone from the catalogue: deleted if nothing refers to it, else kept inactive."""
    if shape.results.exists():
        if shape.active:
            Shape.objects.filter(pk=shape.pk).update(active=False)
        return
    shape.delete()


# ---------------------------------------------------------------- GPU types


def sync_gpu_types(specs: dict[str, GpuSpec] | None = None) -> SyncReport:
    specs = load_gpu_specs() if specs is None else specs
    report = SyncReport()
    for key, spec in specs.items():
        values = _gpu_values(spec)
        row = GpuType.objects.filter(key=key).first()
        if row is not None and all(getattr(row, name) == value for name, value in values.items()):
            report.unchanged.append(key)
            continue
        GpuType.objects.update_or_create(key=key, defaults={**values, "synced_at": timezone.now()})
        (report.updated if row is not None else report.created).append(key)
    for key in GpuType.objects.exclude(key__in=list(specs)).values_list("key", flat=True):
        report.warnings.append(f"GPU type {key!r} is in the database but not in evaluator/gpus.toml")
    return report


def _gpu_values(spec: GpuSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "arch": None if spec.development_device else spec.arch,
        "name_patterns": list(spec.name_patterns),
        "peaks": dict(spec.peaks_tflops),
        "hbm_bytes_per_s": spec.hbm_tbps * 1e12 if spec.hbm_tbps else None,
        "link_bytes_per_s_per_direction": (
            spec.nvlink_gbps_per_direction * 1e9 if spec.nvlink_gbps_per_direction else None
        ),
        "estimated": spec.estimated,
        "verified_on_hardware": spec.verified_on_hardware,
        "development_device": spec.development_device,
        "source": spec.source,
        "notes": spec.notes,
    }
