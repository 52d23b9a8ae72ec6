"""What the two converters share: the candidate problem they build, names, dtypes, shape ids and
flags, and the rewrite of device literals in upstream code.

Pure Python (no torch): the converters import torch only where they run upstream code.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.problems import DTYPES, Shape

#: Shapes flagged ``cpu`` (what the CPU self-check and the CPU development device run) move at
#: most this many bytes of declared tensors: the CPU harness's memory for one shape's input sets
#: (evaluator/api.py), above the native catalogue's 16 MB because imported definitions often fix
#: large hidden sizes.
CPU_SHAPE_MAX_BYTES = 64 * 2**20
#: A problem whose every shape is above CPU_SHAPE_MAX_BYTES (large constant weights) gets its
#: smallest shape flagged ``cpu`` when it moves at most this much: heavy for the CPU development
#: device, but checked there rather than never (the report notes it).
CPU_SHAPE_HEAVY_BYTES = 512 * 2**20
#: The CPU checks run a CPU shape's reference several times (baseline, reference, float64): a shape
#: whose reference computes more than this many flops is not one (a 3D convolution stack at a
#: realistic size is minutes on two cores).
CPU_FLOPS_MAX = 2e10
#: At most this many shapes are flagged ``cpu``; the second one only when it moves at most this
#: many times the first one's bytes.
CPU_SHAPES = 2
CPU_SECOND_SHAPE_RATIO = 8
#: Keys of a ``[[shapes]]`` entry that are not axes, so no axis may carry these names.
SHAPE_FLAGS = ("ranked", "quick", "cpu")
SHAPE_KEYS = (*SHAPE_FLAGS, "id", "tolerance")
#: The one input distribution of an imported problem whose source has no distribution parameter.
DISTRIBUTION = "upstream"
#: What the converter writes next to problem.toml: how SOLboard's contract maps onto the upstream code.
ADAPTER_FILE = "adapter.json"
#: Bumped when the converter's output changes meaning (stored in problem.toml's [import] table).
CONVERTER_VERSION = 3
#: Longest problem name the site stores (a SlugField of 64).
MAX_NAME = 64
#: Longest shape id an import writes: short enough to read in a table and a URL.
MAX_SHAPE_ID = 64

DTYPE_BYTES = {
    "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int32": 4, "int64": 8, "float64": 8, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}  # fmt: skip
assert set(DTYPE_BYTES) == set(DTYPES)

#: dtypes of the sources that SOLboard cannot hold, with what a maintainer can do about them.
UNSUPPORTED_DTYPES = {
    "float8_e4m3fnuz": "AMD's fp8 format (MI300): no NVIDIA GPU computes it, so the task is AMD-only",
    "float8_e5m2fnuz": "AMD's fp8 format (MI300): no NVIDIA GPU computes it, so the task is AMD-only",
    "float4_e2m1fn_x2": (
        "packed fp4 (two values a byte): SOLboard has no fp4 tensors yet, and the references "
        "that use them need Blackwell's block-scaled matmul, which the CPU cannot run to validate"
    ),
    "float4_e2m1": "fp4: SOLboard has no fp4 tensors yet",
}


class Refused(Exception):
    """The problem cannot be converted; the message says why (one line, for the report)."""


@dataclass
class Candidate:
    """A problem in SOLboard's terms, built by a converter and not yet written or validated."""

    source: Path
    format: str
    upstream_name: str
    name: str
    title: str
    description: str
    axes: list[str]
    inputs: list[dict[str, Any]]  # {"name", "shape": [axis | int | "AXIS+n" ...], "dtype"}
    outputs: list[dict[str, Any]]
    tolerance: dict[str, float]  # atol, rtol, matched_ratio: the problem's
    #: Axis values plus "ranked" (the source's intent: ranked when counts exist), optional
    #: "tolerance" (the shape's own), later "id", "cpu" and "quick".
    shapes: list[dict[str, Any]]
    baseline: str
    adapter: dict[str, Any]
    #: Files of the problem folder other than problem.toml, counts.py and reference.py (relative path).
    files: dict[str, str] = field(default_factory=dict)
    #: counts.py given with the source (SOLboard's format), or None: derived, else missing.
    counts_source: str | None = None
    scalar_args: list[str] = field(default_factory=list)
    distributions: list[str] = field(default_factory=lambda: [DISTRIBUTION])
    #: Per-output tolerances (``[tolerance.<output>]``), where the source checks outputs apart.
    output_tolerances: dict[str, dict[str, float]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Where the source lives: repository and path (never a local absolute path).
    provenance: str = ""
    source_digest: str = ""
    #: Counts derived from the reference (``derived_counts``), by shape id; None until derived.
    derived: dict[str, dict[str, Any]] | None = None
    #: The languages it takes and its ``[ptx]`` table (``native_table``: set once the shapes are final).
    languages: list[str] = field(default_factory=lambda: ["python"])
    ptx: dict[str, Any] = field(default_factory=dict)
    #: Why no shape fits the CPU, when none does (``flag_shapes``): every shape needs a GPU.
    gpu_only: str | None = None
    #: Set when the import widened the source's tolerance (``worker._widen_tolerance``): the factor,
    #: the measured need, upstream's problem-level tolerance and why. None when it is upstream's.
    widened: dict[str, Any] | None = None

    @property
    def counts_mode(self) -> str:
        if self.counts_source is not None:
            return "provided"
        return "derived" if self.derived else "missing"

    @property
    def rankable(self) -> bool:
        return self.counts_mode != "missing" and any(self.ranked(shape) for shape in self.shapes)

    def ranked(self, shape: dict[str, Any]) -> bool:
        """A shape ranks when the source ranks it and it has counts."""
        if not shape.get("ranked"):
            return False
        if self.counts_source is not None:
            return True
        return self.derived is not None and str(shape.get("id")) in self.derived


# ---------------------------------------------------------------- names


def folders_with(root: Path, marker: str) -> list[Path]:
    """``root`` itself when it holds ``marker`` (a format's definition file), else every folder below
    it that does."""
    if (root / marker).is_file():
        return [root]
    return sorted(path.parent for path in root.rglob(marker))


def problem_name(upstream: str, prefix: str = "") -> str:
    """A catalogue name (the site's slug, a folder and an identifier): lower case letters, digits
    and underscores, not starting with a digit."""
    name = re.sub(r"[^a-z0-9_]+", "_", f"{prefix}{upstream}".lower()).strip("_")
    name = re.sub(r"_+", "_", name)
    if not name:
        raise Refused(f"no usable problem name in {upstream!r}")
    if name[0].isdigit():
        name = f"p_{name}"
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def identifier(text: str, fallback: str) -> str:
    """A Python identifier close to ``text`` (tensor names become keyword-free identifiers)."""
    name = re.sub(r"\W+", "_", text).strip("_")
    if not name or name[0].isdigit():
        name = f"{fallback}_{name}" if name else fallback
    return name


def unique(names: Iterable[str], taken: Iterable[str] = ()) -> list[str]:
    """The names, each made unique (``x``, ``x_2``) and distinct from ``taken``."""
    seen = set(taken)
    result = []
    for name in names:
        candidate, index = name, 2
        while candidate in seen:
            candidate, index = f"{name}_{index}", index + 1
        seen.add(candidate)
        result.append(candidate)
    return result


def check_dtype(where: str, dtype: str) -> str:
    if dtype in DTYPES:
        return dtype
    why = UNSUPPORTED_DTYPES.get(dtype, f"which SOLboard does not support (supported: {', '.join(DTYPES)})")
    raise Refused(f"{where} has dtype {dtype!r}: {why}")


def check_axis_names(names: Iterable[str]) -> None:
    for name in names:
        if name in SHAPE_KEYS:
            raise Refused(f"axis {name!r} has the name of a shape key ({', '.join(SHAPE_KEYS)})")


def meaning_digest(candidate: Candidate) -> str:
    """SHA-256 of what the candidate means (its declared problem, shapes, tolerances, adapter and
    upstream code), not of the files it came from: the same definition written another way (its
    reference inline or in reference.py, keys reordered) is the same import."""
    meaning = {
        "format": candidate.format, "upstream": candidate.upstream_name, "axes": candidate.axes,
        "inputs": candidate.inputs, "outputs": candidate.outputs, "tolerance": candidate.tolerance,
        "output_tolerances": candidate.output_tolerances, "shapes": candidate.shapes,
        "adapter": candidate.adapter, "files": candidate.files, "counts": candidate.counts_source,
        "scalar_args": candidate.scalar_args, "distributions": candidate.distributions,
        "dropped": candidate.dropped, "description": candidate.description,
        "languages": candidate.languages, "ptx": candidate.ptx,
    }
    return hashlib.sha256(json.dumps(meaning, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- shapes


def dim_size(dim: str | int, axes: dict[str, int]) -> int:
    """A declared dimension at these axes (the catalogue's rules, without its error type)."""
    from evaluator.problems import _dim_size

    return _dim_size(dim, axes)


def declared_bytes(specs: Iterable[dict[str, Any]], axes: dict[str, int]) -> int:
    total = 0
    for spec in specs:
        numel = 1
        for dim in spec["shape"]:
            numel *= dim_size(dim, axes)
        total += numel * DTYPE_BYTES[spec["dtype"]]
    return total


def full_shape_id(axes: dict[str, int]) -> str:
    """The catalogue's default id (every axis): what two shapes of the same axes share."""
    return Shape(dict(axes)).shape_id


def assign_shape_ids(shapes: list[dict[str, Any]], axes: list[str]) -> None:
    """Short, stable ids: the axes that vary between the shapes (``num_tokens1056``), their
    initials when that is long (``nt1056_sl128``), a digest of the axes when even that is."""
    varying = [axis for axis in axes if len({shape[axis] for shape in shapes}) > 1] or list(axes)
    styles = (lambda axis: axis.lower(), _initials)
    for style in styles:
        ids = ["_".join(f"{style(axis)}{shape[axis]}" for axis in varying) for shape in shapes]
        if max(map(len, ids)) <= MAX_SHAPE_ID and len(set(ids)) == len(ids):
            break
    else:
        ids = ["w" + hashlib.sha256(json.dumps({a: shape[a] for a in axes}).encode()).hexdigest()[:12]
               for shape in shapes]
    for shape, ident in zip(shapes, ids, strict=False):
        shape["id"] = ident


def _initials(axis: str) -> str:
    parts = [part for part in re.split(r"[_\W]+", axis) if part]
    return "".join(part[0].lower() for part in parts) or axis.lower()


def flag_shapes(candidate: Candidate) -> None:
    """Set ``cpu`` on the smallest shapes (at most CPU_SHAPES, each under CPU_SHAPE_MAX_BYTES,
    unranked ones first; the smallest one under CPU_SHAPE_HEAVY_BYTES when none is) and ``quick``
    on the smallest of the others; when no shape is small enough for the CPU self-check, none is
    flagged and the problem needs a GPU (``_needs_gpu``)."""
    tensors = candidate.inputs + candidate.outputs
    sized = [(declared_bytes(tensors, {axis: shape[axis] for axis in candidate.axes}), index)
             for index, shape in enumerate(candidate.shapes)]
    small = sorted(
        (bool(candidate.shapes[i]["ranked"]), size, i) for size, i in sized if size <= CPU_SHAPE_MAX_BYTES
    )
    if not small:
        size, index = min(sized)
        if size > CPU_SHAPE_HEAVY_BYTES:
            _needs_gpu(candidate, size)
            return
        small = [(False, size, index)]
        candidate.notes.append(
            f"the CPU shape {candidate.shapes[index].get('id')} moves {size / 1e6:.0f} MB "
            "(every shape is larger than the usual 64 MiB): heavy for the CPU development device"
        )
    # a second CPU shape only near the first's size: the CPU checks run the reference several times,
    # and a shape 100x larger turns seconds into minutes (a CPU fp8 GEMM is emulated)
    cpu = {index for _, size, index in small[:CPU_SHAPES] if size <= CPU_SECOND_SHAPE_RATIO * small[0][1]}
    for index, shape in enumerate(candidate.shapes):
        shape["cpu"] = index in cpu
        shape["quick"] = False
    others = sorted((not candidate.shapes[i]["ranked"], size, i) for size, i in sized if i not in cpu)
    if others:
        candidate.shapes[others[0][2]]["quick"] = True


def _needs_gpu(candidate: Candidate, smallest: int) -> None:
    """No shape fits the CPU: every shape is flagged not ``cpu`` (the problem is checked under fake
    tensors at import, for real on GPU runners only) and the problem says so; the smallest shape
    is the quick one."""
    why = (
        f"every shape moves more than the CPU check's {CPU_SHAPE_HEAVY_BYTES / 2**20:.0f} MiB (the smallest "
        f"{smallest / 1e6:.0f} MB) and the reference fixes the sizes that make it so"
    )
    candidate.gpu_only = why
    candidate.description += (
        f"\n\nNeeds a GPU: {why}. It is checked and ranked on GPU runners only; the CPU "
        "development device does not run it."
    )
    sized = sorted(
        (declared_bytes(candidate.inputs + candidate.outputs, {a: shape[a] for a in candidate.axes}), i)
        for i, shape in enumerate(candidate.shapes)
    )
    for index, shape in enumerate(candidate.shapes):
        shape["cpu"], shape["quick"] = False, index == sized[0][1]
    candidate.notes.append(
        f"needs a GPU: {why}; no CPU shape, so the CPU self-check and its float64 comparison "
        "run on GPU runners only (benchmarks/import_gpu_check.sh), and the CPU development "
        "device refuses its jobs"
    )


def majority(values: list[Any]) -> Any:
    """The most common value (the first seen among equals)."""
    counts = Counter(json.dumps(value, sort_keys=True) for value in values)
    best = max(counts.values())
    return next(value for value in values if counts[json.dumps(value, sort_keys=True)] == best)



# ---------------------------------------------------------------- device literals


_CUDA = re.compile(r"cuda(:\d+)?")
DEVICE_NAME = "_SOLBOARD_DEVICE"


def rewrite_devices(source: str) -> tuple[str, int]:
    """Upstream source with every ``"cuda"`` / ``"cuda:N"`` literal and every argument-less
    ``.cuda()`` replaced by the adapter's device name, and that name defined after the docstring
    and ``__future__`` imports. Returns (source, number of replacements); the source is unchanged
    when there is nothing to replace."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (line index, start byte, end byte, text)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _CUDA.fullmatch(node.value)
            and node.end_lineno == node.lineno
            and node.end_col_offset is not None
        ):
            edits.append((node.lineno - 1, node.col_offset, node.end_col_offset, DEVICE_NAME))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "cuda"
            and not node.args
            and not node.keywords
            and node.end_lineno is not None
            and node.func.value.end_lineno == node.end_lineno
            and node.func.value.end_col_offset is not None
            and node.end_col_offset is not None
        ):
            edits.append(
                (
                    node.end_lineno - 1,
                    node.func.value.end_col_offset,
                    node.end_col_offset,
                    f".to({DEVICE_NAME})",
                )
            )
    if not edits:
        return source, 0
    encoded = [line.encode() for line in lines]
    for line, start, end, text in sorted(edits, reverse=True):
        encoded[line] = encoded[line][:start] + text.encode() + encoded[line][end:]
    insert_at = 0
    for statement in tree.body:
        is_docstring = (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
            and statement is tree.body[0]
        )
        is_future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        if not (is_docstring or is_future):
            break
        insert_at = statement.end_lineno or insert_at
    definition = f'{DEVICE_NAME} = "cuda"  # set to the device of each call by SOLboard\'s adapter\n'.encode()
    encoded.insert(insert_at, definition)
    return b"".join(encoded).decode(), len(edits)


