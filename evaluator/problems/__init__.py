"""The problem catalogue: one folder per problem, metadata in ``problem.toml``.

Each folder holds:

- ``problem.toml``: name, title, description, kind, inputs/outputs (shapes in terms of axes,
  dtypes, layouts), tolerance, languages, distributions, public test seeds, the shape list (each
  with a ``ranked`` and a ``quick`` flag), version, and for PTX/CUDA the parameter ABI.
- ``counts.py``: ``counts(axes) -> Counts`` — exact flops per class and minimum HBM bytes. Pure
  arithmetic, no torch, so the site can compute speed-of-light figures without a GPU stack.
- ``reference.py`` (imports torch): ``generate_inputs(axes, seed, device, distribution)``,
  ``reference(inputs, axes)`` and ``baseline(*inputs, *outputs)`` in destination-passing style.
  A multi-GPU problem (``kind = "multi"``) has per-rank tensor shapes (``M/world_size``), its counts
  and reference at ``axes["world_size"]``, and five functions (``_multi.py``, docs/multigpu.md).

This module never imports torch: the web reads the catalogue through it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from evaluator.vocabulary import CPU, LANGUAGES

CATALOGUE_DIR = Path(__file__).resolve().parent
#: The environment variable that moves the folder of imported problems (``imported_dir``).
IMPORTED_DIR_ENV = "SOLBOARD_IMPORTED_PROBLEMS"

#: The axis a multi-GPU problem's shapes and counts read the number of ranks from. It is not part of
#: a shape (shape ids stay the same at every world size): the harness adds it (``Problem.axes_at``).
WORLD_SIZE_AXIS = "world_size"

#: Flop classes, each with its own peak in ``evaluator/gpus.toml``.
FLOP_CLASSES = ("bf16_tensor", "fp16_tensor", "fp8_tensor", "tf32_tensor", "fp32_simt", "fp64")
DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "int64", "float64",
          "int16", "int8", "uint8", "bool")


class CatalogueError(ValueError):
    """A problem folder is malformed; the message names the folder and the field."""


@dataclass(frozen=True)
class Counts:
    """Exact work of one call on one shape."""

    flops: dict[str, float]
    bytes: float
    comm_bytes: float = 0.0
    #: Derived automatically at import (docs/importing.md, "Derived counts"), not counted by hand:
    #: an estimate that can exceed the real minimum (a causal mask counted in full, an input a kernel
    #: need not read whole), so a time below its t_SOL is a note about the counts, never a verdict.
    estimated: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.flops) - set(FLOP_CLASSES)
        if unknown:
            raise CatalogueError(f"unknown flop classes {sorted(unknown)}; known: {FLOP_CLASSES}")

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))


#: ``row_rms`` tolerances: the smallest row scale, as a fraction of the whole output's RMS.
ROW_RMS_FLOOR = 0.1


@dataclass(frozen=True)
class OutputTolerance:
    """Tolerance of one output: an element passes if |out - ref| <= atol_abs + rtol * |ref|.

    ``atol_scale`` says what ``atol`` is relative to, for outputs whose typical size depends on the
    shape or the row, where no single absolute atol fits them all:

    - ``absolute``: atol_abs = atol.
    - ``rms``: atol_abs = atol * RMS of the whole reference output (gemm_fp8: the accumulation
      error of fp8 tensor cores grows with the output's scale).
    - ``row_rms``: atol_abs = atol * RMS of each row of the reference (over its last dimension),
      but at least ``ROW_RMS_FLOOR`` times the whole output's RMS. Attention: an output row
      belongs to one query (or key) and its size goes like 1/sqrt(keys seen), which a causal mask
      makes vary from row to row. The floor keeps a row that is exactly zero in the reference
      (causal dq of the first query) from demanding exact zeros of fp32 arithmetic.
    - ``inputs``: atol_abs = atol * the scale the problem's reference module computes from the
      inputs (``error_scale(inputs, axes)``, one tensor per output, broadcastable to it). For an
      output that can cancel to nearly zero while its rounding error does not: reduction_sum's
      row sum, whose error goes with the row's L2 norm whatever the sum comes to.
    """

    atol: float
    rtol: float
    matched_ratio: float = 1.0
    atol_scale: Literal["absolute", "rms", "row_rms", "inputs"] = "absolute"

    def allowed_error(self, reference: Any, scale: Any = None) -> Any:
        """atol_abs + rtol * |ref| for every element, as a tensor broadcastable to ``reference``.

        ``reference``: the reference output as a float64 torch tensor, in its declared shape
        (before any reshape: ``row_rms`` reduces over the last dimension). ``scale``: for
        ``inputs``, this output's tensor from the reference module's ``error_scale``. Duck-typed,
        so this module stays free of torch.
        """
        if self.atol_scale == "inputs":
            if scale is None:
                raise ValueError(
                    "atol_scale 'inputs' needs the scale from the reference module's error_scale"
                )
            atol = self.atol * scale
        elif self.atol_scale == "rms":
            atol = self.atol * reference.square().mean().sqrt()
        elif self.atol_scale == "row_rms":
            floor = ROW_RMS_FLOOR * reference.square().mean().sqrt()
            atol = self.atol * reference.square().mean(dim=-1, keepdim=True).sqrt().clamp_min(floor)
        else:
            atol = self.atol
        return atol + self.rtol * reference.abs()


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[str | int, ...]  # axis names or literal sizes
    dtype: str
    layout: str = "row-major"

    def concrete_shape(self, axes: dict[str, int]) -> tuple[int, ...]:
        return tuple(_dim_size(dim, axes) for dim in self.shape)


def _dim_size(dim: str | int, axes: dict[str, int]) -> int:
    """A literal size, an axis name, ``AXIS+n`` / ``AXIS-n`` (e.g. ``G+1`` group offsets),
    ``n*AXIS`` (``2*I``: two halves side by side), ``AXIS*AXIS`` (``T*K``: one row per token and
    choice), ``AXIS/AXIS`` (a multi-GPU problem's per-rank share, ``M/world_size``) or ``AXIS/n``
    (one value per group of n, ``H/128`` block scales); a division must be exact."""
    if isinstance(dim, int):
        return dim
    if dim in axes:
        return axes[dim]
    factor, star, name = (part.strip() for part in dim.partition("*"))
    if star and (factor.isdigit() or factor in axes) and name in axes:
        return (axes[factor] if factor in axes else int(factor)) * axes[name]
    numerator, slash, denominator = (part.strip() for part in dim.partition("/"))
    if slash and numerator in axes and (denominator in axes or denominator.isdigit()):
        whole, parts = axes[numerator], axes[denominator] if denominator in axes else int(denominator)
        if parts <= 0 or whole % parts:
            divisor = f"{denominator}={parts}" if denominator in axes else str(parts)
            raise CatalogueError(f"dimension {dim!r}: {numerator}={whole} is not divisible by {divisor}")
        return whole // parts
    for sign, op in (("+", 1), ("-", -1)):
        name, _, offset = dim.partition(sign)
        if offset and name.strip() in axes and offset.strip().isdigit():
            return axes[name.strip()] + op * int(offset)
    return _dim_expression(dim, axes)


def _dim_expression(dim: str, axes: dict[str, int]) -> int:
    """A dimension written as integer arithmetic of axes (``size - k + 1``, ``(H + 1) // 2``): the
    sizes of imported problems, whose sources compute dimensions in any way. Only names of axes,
    integers, ``+ - * // %`` and parentheses; the result must be a non-negative integer."""
    from evaluator.problems.dims import evaluate_dim

    try:
        value = evaluate_dim(dim, axes)
    except ValueError as error:
        raise CatalogueError(f"dimension {dim!r} is neither an axis of {sorted(axes)} nor an expression of "
                             f"them: {error}") from None
    if value < 0:
        raise CatalogueError(f"dimension {dim!r} is {value} at {axes}")
    return value


@dataclass(frozen=True)
class Shape:
    axes: dict[str, int]
    ranked: bool = True
    quick: bool = False
    cpu: bool = False  # small enough for the CPU development device
    #: An explicit id (``id = "..."`` in problem.toml); else one built from every axis. Imported
    #: problems with many constant axes give a short id of the axes that vary (docs/importing.md).
    id: str | None = None
    #: This shape's own tolerance (``tolerance = {atol = ..., rtol = ...}``), replacing the
    #: problem's [tolerance] values for every output (each output keeps its ``atol_scale``):
    #: SOL-ExecBench calibrates one per workload. None for most shapes.
    tolerance: dict[str, float] | None = None

    @property
    def shape_id(self) -> str:
        if self.id:
            return self.id
        return "_".join(f"{name.lower()}{value}" for name, value in self.axes.items())


@dataclass(frozen=True)
class Problem:
    name: str
    title: str
    description: str
    kind: Literal["single", "multi"]
    #: The world size the site queues this problem for (``gpu.<type>.x<world_size>``); 1 if single.
    world_size: int
    version: int
    axes: tuple[str, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    atol: float
    rtol: float
    matched_ratio: float
    languages: tuple[str, ...]
    distributions: tuple[str, ...]
    test_seeds: tuple[int, ...]
    shapes: tuple[Shape, ...]
    baseline_name: str
    ptx: dict[str, Any] = field(default_factory=dict)  # parameter ABI and required features
    folder: Path = CATALOGUE_DIR
    #: The tolerance of every output: ``[tolerance]`` with per-output overrides from
    #: ``[tolerance.<output>]`` (attention's fp32 LSE beside its bf16 O). Use ``tolerance_for``.
    output_tolerances: dict[str, OutputTolerance] = field(default_factory=dict)
    #: Axes a kernel cannot read off its tensors' shapes (attention's ``causal``): the harness
    #: passes them to ``kernel`` and ``baseline`` as keyword ints after the tensors
    #: (``kernel(*inputs, *outputs, **problem.call_kwargs(axes))``). Empty for most problems.
    scalar_args: tuple[str, ...] = ()
    #: Multi-GPU problems: every world size the shapes divide evenly for (``world_size`` among them).
    world_sizes: tuple[int, ...] = (1,)
    #: Multi-GPU problems: the lower bound on bytes each GPU sends, in words (``counts.py`` computes it).
    comm_bytes_formula: str = ""
    #: Problems converted from another benchmark's format (``python -m evaluator import-problems``):
    #: the ``[import]`` table of problem.toml (format, source, what was dropped). Empty for native ones.
    imported: dict[str, Any] = field(default_factory=dict)

    def axes_at(self, axes: dict[str, int], world_size: int | None = None) -> dict[str, int]:
        """A shape's axes as the kernel, counts and reference of one world size see them: a multi-GPU
        problem's gain ``world_size`` (default: the problem's own); a single-GPU problem's are as given."""
        if self.kind != "multi":
            return dict(axes)
        size = self.world_size if world_size is None else int(world_size)
        if size not in self.world_sizes:
            raise CatalogueError(f"{self.name} runs at world sizes {list(self.world_sizes)}, not {size}")
        return {**axes, WORLD_SIZE_AXIS: size}

    def call_kwargs(self, axes: dict[str, int]) -> dict[str, int]:
        """Keyword arguments of a kernel or baseline call on a shape with these axes."""
        return {name: int(axes[name]) for name in self.scalar_args}

    def tolerance_for(self, output: str, axes: dict[str, int] | None = None) -> OutputTolerance:
        """The tolerance that applies to one output tensor (mind its ``atol_scale``); at ``axes``,
        the shape's own tolerance when it has one (imported problems' per-workload tolerances)."""
        default = OutputTolerance(self.atol, self.rtol, self.matched_ratio)
        tolerance = self.output_tolerances.get(output, default)
        own = self._shape_tolerance(axes) if axes is not None else None
        if own is None:
            return tolerance
        return OutputTolerance(
            atol=float(own.get("atol", tolerance.atol)),
            rtol=float(own.get("rtol", tolerance.rtol)),
            matched_ratio=float(own.get("matched_ratio", tolerance.matched_ratio)),
            atol_scale=tolerance.atol_scale,
        )

    def _shape_tolerance(self, axes: dict[str, int]) -> dict[str, float] | None:
        wanted = {name: int(axes[name]) for name in self.axes if name in axes}
        for shape in self.shapes:
            if shape.tolerance is not None and shape.axes == wanted:
                return shape.tolerance
        return None

    @property
    def ranked_shapes(self) -> tuple[Shape, ...]:
        return tuple(shape for shape in self.shapes if shape.ranked)

    def select_shapes(self, which: str, device: str = "cuda") -> tuple[Shape, ...]:
        """``all``, ``quick`` (the shapes flagged quick) or ``ranked``.

        On the CPU development device only shapes flagged ``cpu`` exist (every native problem has
        some; an import whose every shape needs a GPU has none): it checks correctness and the
        harness, never ranks.
        """
        if device == CPU:
            return tuple(shape for shape in self.shapes if shape.cpu)
        if which == "all":
            return self.shapes
        if which == "quick":
            return tuple(shape for shape in self.shapes if shape.quick) or self.shapes[:1]
        if which == "ranked":
            return self.ranked_shapes
        raise CatalogueError(f"unknown shape selection {which!r}: use all, quick or ranked")

    def shape(self, shape_id: str) -> Shape:
        for shape in self.shapes:
            if shape.shape_id == shape_id:
                return shape
        raise CatalogueError(f"{self.name} has no shape {shape_id!r}")

    def counts(self, axes: dict[str, int]) -> Counts:
        """Exact counts of one call; a multi-GPU problem's at ``axes["world_size"]`` when given, else
        at the problem's own world size (what the site stores and ranks)."""
        module = self._module("counts")
        if self.kind == "multi" and WORLD_SIZE_AXIS not in axes:
            axes = self.axes_at(axes)
        counts: Counts = module.counts(dict(axes))
        if self.counts_are_derived and not counts.estimated:
            counts = replace(counts, estimated=True)
        return counts

    @property
    def counts_are_derived(self) -> bool:
        """Counts an import derived from the reference (``[import] counts = "derived"``)."""
        return self.imported.get("counts") == "derived"

    def reference_module(self) -> ModuleType:
        """The torch side: generate_inputs, reference, baseline. Imports torch."""
        return self._module("reference")

    def _module(self, stem: str) -> ModuleType:
        """``counts`` or ``reference`` of this problem: a native problem's by its package name, one
        in another folder (the imported problems) from its file."""
        if self.folder in (CATALOGUE_DIR, CATALOGUE_DIR / self.name):
            return importlib.import_module(f"evaluator.problems.{self.name}.{stem}")
        return _folder_module(self.folder, stem)


def _tensor_specs(raw: list[dict[str, Any]], where: str) -> tuple[TensorSpec, ...]:
    specs = []
    for item in raw:
        dtype = item.get("dtype")
        if dtype not in DTYPES:
            raise CatalogueError(f"{where}: tensor {item.get('name')!r} has unknown dtype {dtype!r}")
        specs.append(TensorSpec(item["name"], tuple(item["shape"]), dtype, item.get("layout", "row-major")))
    return tuple(specs)


def _shapes(raw: list[dict[str, Any]], axes: tuple[str, ...], where: str) -> tuple[Shape, ...]:
    shapes = []
    for item in raw:
        values = {axis: item[axis] for axis in axes if axis in item}
        if set(values) != set(axes):
            raise CatalogueError(f"{where}: shape {item} must give every axis {axes}")
        shapes.append(
            Shape(
                values,
                ranked=bool(item.get("ranked", True)),
                quick=bool(item.get("quick", False)),
                cpu=bool(item.get("cpu", False)),
                id=str(item["id"]) if item.get("id") else None,
                tolerance=_shape_tolerance(item.get("tolerance"), where),
            )
        )
    ids = [shape.shape_id for shape in shapes]
    if len(set(ids)) != len(ids):
        raise CatalogueError(f"{where}: duplicate shapes")
    return tuple(shapes)


def _shape_tolerance(raw: Any, where: str) -> dict[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not set(raw) <= {"atol", "rtol", "matched_ratio"}:
        raise CatalogueError(
            f"{where}: a shape's tolerance is a table of atol, rtol and matched_ratio, not {raw!r}"
        )
    return {key: float(value) for key, value in raw.items()}


#: The site stores these in columns of this many characters (leaderboard/models/catalogue.py):
#: SQLite would take longer text, PostgreSQL refuses it at sync.
TEXT_LIMITS = {"name": 64, "title": 200, "baseline": 200}


def _check_lengths(meta: dict[str, Any], where: str) -> None:
    for key, limit in TEXT_LIMITS.items():
        if len(str(meta.get(key, ""))) > limit:
            raise CatalogueError(f"{where}: {key} is {len(str(meta[key]))} characters, at most {limit} "
                                 "(a longer explanation goes in a comment or the description)")


def load_problem(folder: Path) -> Problem:
    where = f"{folder.name}/problem.toml"
    try:
        meta = tomllib.loads((folder / "problem.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CatalogueError(f"{where}: {error}") from error
    if meta.get("name") != folder.name:
        raise CatalogueError(f"{where}: name {meta.get('name')!r} must equal the folder name")
    axes = tuple(meta["axes"])
    tolerance = meta.get("tolerance", {})
    languages = tuple(meta.get("languages", ["python"]))
    if not set(languages) <= set(LANGUAGES):
        raise CatalogueError(f"{where}: languages {languages} not within {LANGUAGES}")
    kind, world_size, world_sizes = _world(meta, where)
    _check_lengths(meta, where)
    problem = Problem(
        name=meta["name"],
        title=meta["title"],
        description=meta["description"].strip(),
        kind=kind,
        world_size=world_size,
        version=int(meta["version"]),
        axes=axes,
        inputs=_tensor_specs(meta["inputs"], where),
        outputs=_tensor_specs(meta["outputs"], where),
        atol=float(tolerance.get("atol", 0.0)),
        rtol=float(tolerance.get("rtol", 0.0)),
        matched_ratio=float(tolerance.get("matched_ratio", 1.0)),
        languages=languages,
        distributions=tuple(meta.get("distributions", ["normal"])),
        test_seeds=tuple(meta.get("test_seeds", [1, 2, 3])),
        shapes=_shapes(meta["shapes"], axes, where),
        baseline_name=meta.get("baseline", ""),
        ptx=meta.get("ptx", {}),
        folder=folder,
        imported=dict(meta.get("import", {})),
        output_tolerances=_output_tolerances(tolerance, meta["outputs"], where),
        scalar_args=_scalar_args(meta.get("scalar_args", []), axes, where),
        world_sizes=world_sizes,
        comm_bytes_formula=str(meta.get("comm_bytes", "")).strip(),
    )
    if kind == "multi":
        _check_multi(problem, where)
    _check_ptx_table(problem, where)
    return problem


def _check_ptx_table(problem: Problem, where: str) -> None:
    """A problem's ``[ptx]`` table names what the problem has (``evaluator.ptx.table``): a table
    written by hand, or by an import, cannot be wrong silently (a wrong one would refuse every
    native kernel of the problem at upload, or launch one with a parameter the harness cannot fill)."""
    if not problem.ptx and not set(problem.languages) & {"ptx", "cuda"}:
        return
    from evaluator.ptx.table import table_errors

    errors = table_errors(problem)
    if errors:
        raise CatalogueError(f"{where}: [ptx] table: " + "; ".join(errors))


def _world(meta: dict[str, Any], where: str) -> tuple[Literal["single", "multi"], int, tuple[int, ...]]:
    """(kind, world size, world sizes). A single-GPU problem runs on one GPU; a multi-GPU one on
    ``world_size`` GPUs by default and on any of ``world_sizes``."""
    kind = meta.get("kind", "single")
    if kind == "single":
        if int(meta.get("world_size", 1)) != 1 or "world_sizes" in meta:
            raise CatalogueError(f"{where}: a single-GPU problem has world size 1")
        return "single", 1, (1,)
    if kind != "multi":
        raise CatalogueError(f"{where}: kind {kind!r} must be single or multi")
    world_size = int(meta.get("world_size", 2))
    world_sizes = tuple(sorted({int(size) for size in meta.get("world_sizes", [world_size])}))
    if world_size not in world_sizes or min(world_sizes) < 2:
        raise CatalogueError(
            f"{where}: world_sizes {list(world_sizes)} must be >= 2 and hold world_size {world_size}"
        )
    return "multi", world_size, world_sizes


def _check_multi(problem: Problem, where: str) -> None:
    """Every tensor of every shape has a per-rank size at every world size (shares divide evenly),
    no shape names the world-size axis, and the communication lower bound is stated."""
    if WORLD_SIZE_AXIS in problem.axes:
        raise CatalogueError(f"{where}: {WORLD_SIZE_AXIS} is added by the harness, not an axis of a shape")
    if not problem.comm_bytes_formula:
        raise CatalogueError(f"{where}: a multi-GPU problem states its comm_bytes lower bound")
    for shape in problem.shapes:
        for size in problem.world_sizes:
            axes = problem.axes_at(shape.axes, size)
            for spec in problem.inputs + problem.outputs:
                try:
                    spec.concrete_shape(axes)
                except CatalogueError as error:
                    raise CatalogueError(
                        f"{where}: shape {shape.shape_id} at world size {size}: {error}"
                    ) from None


def _scalar_args(names: list[str], axes: tuple[str, ...], where: str) -> tuple[str, ...]:
    if not set(names) <= set(axes):
        raise CatalogueError(f"{where}: scalar_args {names} must be axes of {axes}")
    return tuple(names)


def _tolerance(table: dict[str, Any], default: OutputTolerance, where: str) -> OutputTolerance:
    scale = table.get("atol_scale", default.atol_scale)
    if scale not in ("absolute", "rms", "row_rms", "inputs"):
        raise CatalogueError(f"{where}: atol_scale {scale!r} must be absolute, rms, row_rms or inputs")
    return OutputTolerance(
        atol=float(table.get("atol", default.atol)),
        rtol=float(table.get("rtol", default.rtol)),
        matched_ratio=float(table.get("matched_ratio", default.matched_ratio)),
        atol_scale=scale,
    )


def _output_tolerances(
    tolerance: dict[str, Any], outputs: list[dict[str, Any]], where: str
) -> dict[str, OutputTolerance]:
    overrides = {key: value for key, value in tolerance.items() if isinstance(value, dict)}
    unknown = set(overrides) - {item["name"] for item in outputs}
    if unknown:
        raise CatalogueError(f"{where}: tolerance for unknown outputs {sorted(unknown)}")
    base = _tolerance(tolerance, OutputTolerance(0.0, 0.0), where)
    return {item["name"]: _tolerance(overrides.get(item["name"], {}), base, where) for item in outputs}


def imported_dir() -> Path:
    """The folder of imported problems the catalogue also reads: ``$SOLBOARD_IMPORTED_PROBLEMS``,
    by default ``evaluator/problems/imported/`` (docs/importing.md). Every process that loads the
    catalogue (site, runner, the evaluator's children) must see the same folder."""
    configured = os.environ.get(IMPORTED_DIR_ENV, "").strip()
    return Path(configured).expanduser().resolve() if configured else CATALOGUE_DIR / "imported"


def _folder_module(folder: Path, stem: str) -> ModuleType:
    """``folder/stem.py`` as a module, loaded once per folder (a name no import statement uses)."""
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    key = f"_solboard_problem_{digest}_{folder.name}_{stem}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, folder / f"{stem}.py")
    if spec is None or spec.loader is None:
        raise CatalogueError(f"{folder.name}: no {stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(key, None)
        raise
    return module


@cache
def load_catalogue() -> dict[str, Problem]:
    """Every problem folder under this package, by name, and every imported problem (``imported_dir``)."""
    folders = sorted(p.parent for p in CATALOGUE_DIR.glob("*/problem.toml"))
    catalogue = {folder.name: load_problem(folder) for folder in folders}
    for folder in sorted(p.parent for p in imported_dir().glob("*/problem.toml")):
        if folder.name in catalogue:
            raise CatalogueError(
                f"{folder}: imported problem {folder.name!r} has the name of another problem"
            )
        catalogue[folder.name] = load_problem(folder)
    return catalogue


def get_problem(name: str) -> Problem:
    catalogue = load_catalogue()
    if name not in catalogue:  # imported since this process read it (import_problems under make run)
        load_catalogue.cache_clear()
        catalogue = load_catalogue()
    if name not in catalogue:
        raise CatalogueError(f"unknown problem {name!r}; known: {', '.join(sorted(catalogue))}")
    return catalogue[name]
