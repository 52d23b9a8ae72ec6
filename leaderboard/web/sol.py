"""Speed of light for the pages: t_SOL per shape and GPU type, from the stored counts and peaks.

Pure arithmetic through ``evaluator.sol`` (no torch); the GPU type's peaks come from its database
row (mirrored from evaluator/gpus.toml), so a page shows what the site would score against.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.gpu_specs import GpuSpec, GpuSpecError
from evaluator.problems import CATALOGUE_DIR, Counts, imported_dir
from evaluator.sol import SolBound, has_counts, t_sol
from leaderboard.models import GpuType, Problem, Shape


@dataclass(frozen=True)
class ShapeSol:
    shape: Shape
    bound: SolBound | None  # None on the development device (no speed of light there)

    @property
    def t_sol_us(self) -> float | None:
        return self.bound.t_sol_us if self.bound else None


def spec_of(gpu: GpuType) -> GpuSpec | None:
    """The GPU type's peaks as the evaluator's GpuSpec; None for the development device."""
    if gpu.development_device:
        return None
    return GpuSpec(
        key=gpu.key, name=gpu.name, arch=gpu.arch or "", peaks_tflops=dict(gpu.peaks),
        hbm_tbps=gpu.hbm_bytes_per_s / 1e12 if gpu.hbm_bytes_per_s else None,
        nvlink_gbps_per_direction=(
            gpu.link_bytes_per_s_per_direction / 1e9 if gpu.link_bytes_per_s_per_direction else None
        ),
    )


def counts_of(shape: Shape) -> Counts:
    raw = shape.counts or {}
    return Counts(flops=dict(raw.get("flops", {})), bytes=float(raw.get("bytes", 0.0)),
                  comm_bytes=float(raw.get("comm_bytes", 0.0)), estimated=bool(raw.get("estimated", False)))


def shape_sol(problem: Problem, shape: Shape, gpu: GpuType) -> ShapeSol:
    spec = spec_of(gpu)
    counts = counts_of(shape)
    if spec is None or not has_counts(counts):  # no speed of light rather than "0 us"
        return ShapeSol(shape, None)
    try:
        return ShapeSol(shape, t_sol(counts, spec, problem.world_size))
    except GpuSpecError:  # a peak this GPU type does not list: no bound rather than a wrong one
        return ShapeSol(shape, None)


@dataclass(frozen=True)
class SolDerivation:
    """How a problem's counts, hence its t_SOL, came about (the problem page says it)."""

    mode: str  # hand (native counts.py), provided (given with an import), derived, missing
    format: str = ""
    source: str = ""


def sol_derivation(name: str) -> SolDerivation:
    """From the catalogue's problem.toml ([import] counts); a problem gone from it reads as hand."""
    from evaluator.problems import CatalogueError, get_problem

    try:
        imported = get_problem(name).imported
    except CatalogueError:
        return SolDerivation("hand")
    if not imported:
        return SolDerivation("hand")
    return SolDerivation(str(imported.get("counts", "missing")), str(imported.get("format", "")),
                         str(imported.get("source", "")))


def reference_source(problem: Problem) -> str:
    """The problem's reference implementation as shipped in the catalogue ('' if it is gone)."""
    path = CATALOGUE_DIR / problem.name / "reference.py"
    if not path.exists():  # an imported problem (docs/importing.md): its reference is the upstream code
        folder = imported_dir() / problem.name
        upstream = folder / "upstream" / "reference.py"
        path = upstream if upstream.exists() else folder / "reference.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""
