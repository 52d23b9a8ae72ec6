"""What the two converters share: the candidate problem they build, names, problem.toml rendering,
shape flags, safe arithmetic on axis expressions and the rewrite of device literals.

Pure Python (no torch): the converters import torch only where they run upstream code.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.problems import DTYPES

#: Shapes flagged ``cpu`` (what the CPU self-check and the CPU development device run) move at
#: most this many bytes of declared tensors: the CPU harness's memory for one shape's input sets
#: (evaluator/api.py), above the native catalogue's 16 MB because imported definitions often fix
#: large hidden sizes.
CPU_SHAPE_MAX_BYTES = 64 * 2**20
#: At most this many shapes are flagged ``cpu``.
CPU_SHAPES = 2
#: Keys of a ``[[shapes]]`` entry that are flags, so no axis may carry these names.
SHAPE_FLAGS = ("ranked", "quick", "cpu")
#: The one input distribution of an imported problem: the source benchmark's own input generator.
DISTRIBUTION = "upstream"
#: Bumped when the converter's output changes meaning (stored in problem.toml's [import] table).
CONVERTER_VERSION = 1
#: Longest problem name the site stores (a SlugField of 64).
MAX_NAME = 64
#: Longest shape id the site stores.
MAX_SHAPE_ID = 200

DTYPE_BYTES = {
    "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int32": 4, "int64": 8, "float64": 8,
}  # fmt: skip
assert set(DTYPE_BYTES) == set(DTYPES)


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
    tolerance: dict[str, float]  # atol, rtol, matched_ratio
    shapes: list[dict[str, Any]]  # axis values plus "ranked" (and later "cpu", "quick")
    baseline: str
    adapter: dict[str, Any]
    #: Files of the problem folder other than problem.toml, counts.py and reference.py (relative path).
    files: dict[str, str] = field(default_factory=dict)
    #: counts.py given with the source (SOLboard's format), or None: counts missing.
    counts_source: str | None = None
    scalar_args: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source_digest: str = ""

    @property
    def rankable(self) -> bool:
        return self.counts_source is not None


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
    if dtype not in DTYPES:
        raise Refused(f"{where} has dtype {dtype!r}, which SOLboard does not support (supported: {', '.join(DTYPES)})")
    return dtype


def check_axis_names(names: Iterable[str]) -> None:
    for name in names:
        if name in SHAPE_FLAGS:
            raise Refused(f"axis {name!r} has the name of a shape flag ({', '.join(SHAPE_FLAGS)})")


def digest_files(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"")
    return digest.hexdigest()


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


def shape_id(axes: dict[str, int]) -> str:
    return "_".join(f"{name.lower()}{value}" for name, value in axes.items())


def flag_shapes(candidate: Candidate) -> None:
    """Set ``cpu`` on the smallest shapes (at most CPU_SHAPES, each under CPU_SHAPE_MAX_BYTES,
    unranked ones first) and ``quick`` on the smallest of the others; refuse when no shape is small
    enough for the CPU self-check."""
    tensors = candidate.inputs + candidate.outputs
    sized = []
    for index, shape in enumerate(candidate.shapes):
        axes = {axis: shape[axis] for axis in candidate.axes}
        if len(shape_id(axes)) > MAX_SHAPE_ID:
            raise Refused(f"shape {shape_id(axes)[:60]}...: its id is longer than {MAX_SHAPE_ID} characters")
        sized.append((declared_bytes(tensors, axes), index))
    small = sorted((bool(candidate.shapes[i]["ranked"]), size, i) for size, i in sized if size <= CPU_SHAPE_MAX_BYTES)
    if not small:
        smallest = min(size for size, _ in sized)
        raise Refused(
            f"no shape is small enough for the CPU check (the smallest moves {smallest / 1e6:.1f} MB of "
            f"tensors; the limit is {CPU_SHAPE_MAX_BYTES / 2**20:.0f} MiB)"
        )
    cpu = {index for _, _, index in small[:CPU_SHAPES]}
    for index, shape in enumerate(candidate.shapes):
        shape["cpu"] = index in cpu
        shape["quick"] = False
    others = sorted((not candidate.shapes[i]["ranked"], size, i) for size, i in sized if i not in cpu)
    if others:
        candidate.shapes[others[0][2]]["quick"] = True


def majority(values: list[Any]) -> Any:
    """The most common value (the first seen among equals)."""
    counts = Counter(json.dumps(value, sort_keys=True) for value in values)
    best = max(counts.values())
    return next(value for value in values if counts[json.dumps(value, sort_keys=True)] == best)


# ---------------------------------------------------------------- arithmetic on axes


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip


def evaluate(expression: str, names: Mapping[str, int | float]) -> Any:
    """Arithmetic, comparisons and ``and``/``or`` over axis names and numbers; nothing else."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"unknown name {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            value = walk(node.operand)
            return value if isinstance(node.op, ast.UAdd) else -value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Compare):
            left = walk(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in _COMPARE:
                    raise ValueError("unsupported comparison")
                right = walk(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = [walk(value) for value in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        raise ValueError(f"unsupported expression element {type(node).__name__}")

    return walk(ast.parse(expression, mode="eval"))


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
                (node.end_lineno - 1, node.func.value.end_col_offset, node.end_col_offset, f".to({DEVICE_NAME})")
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


# ---------------------------------------------------------------- problem.toml


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # 1e-05, inf, nan: all valid TOML floats
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _multiline(text: str) -> str:
    clean = "".join(char for char in text if char in "\n\t" or char >= " ")
    return '"""\n' + clean.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '\n"""'


def render_problem_toml(candidate: Candidate, version: int) -> str:
    """problem.toml of a candidate (the catalogue's format, plus the [import] table)."""
    lines = [
        f"# Written by `python -m evaluator import-problems --format {candidate.format}`: do not edit; import",
        "# again with --replace (docs/importing.md).",
        f"name = {_value(candidate.name)}",
        f"title = {_value(candidate.title)}",
        f"version = {version}",
        'kind = "single"',
        f"description = {_multiline(candidate.description)}",
        f"axes = {_value(candidate.axes)}",
        f"baseline = {_value(candidate.baseline)}",
        'languages = ["python"]',
        f"# One distribution: the inputs {candidate.format} itself draws (docs/importing.md).",
        f"distributions = {_value([DISTRIBUTION])}",
        "test_seeds = [1, 2, 3]",
    ]
    if candidate.scalar_args:
        lines.append(f"scalar_args = {_value(candidate.scalar_args)}")
    for table, specs in (("inputs", candidate.inputs), ("outputs", candidate.outputs)):
        for spec in specs:
            lines += ["", f"[[{table}]]", f"name = {_value(spec['name'])}", f"shape = {_value(list(spec['shape']))}",
                      f"dtype = {_value(spec['dtype'])}"]
    tolerance = candidate.tolerance
    lines += [
        "",
        f"# From {candidate.format}: see the [import] notes.",
        "[tolerance]",
        f"atol = {_value(float(tolerance['atol']))}",
        f"rtol = {_value(float(tolerance['rtol']))}",
        f"matched_ratio = {_value(float(tolerance['matched_ratio']))}",
        "",
        "[import]",
        f"format = {_value(candidate.format)}",
        f"source = {_value(str(candidate.source))}",
        f"upstream_name = {_value(candidate.upstream_name)}",
        f"source_sha256 = {_value(candidate.source_digest)}",
        f"converter_version = {CONVERTER_VERSION}",
        f"counts = {_value('provided' if candidate.rankable else 'missing')}",
        f"dropped = {_value(candidate.dropped)}",
        f"notes = {_value(candidate.notes)}",
    ]
    for shape in candidate.shapes:
        lines += ["", "[[shapes]]"]
        lines += [f"{_key(axis)} = {_value(int(shape[axis]))}" for axis in candidate.axes]
        lines += [f"{flag} = {_value(bool(shape.get(flag, False)))}" for flag in SHAPE_FLAGS]
    return "\n".join(lines) + "\n"


MISSING_COUNTS = '''"""Counts of {name}: MISSING, so the problem is not rankable.

{format} gives no flop or byte counts for this problem, and SOLboard makes none up: every shape
is unranked, and the counts below are zero (no speed of light, never "faster than light"). To rank
it, put a counts.py in SOLboard's format (docs/problems.md) next to the source and import again.
"""

from __future__ import annotations

from evaluator.problems import Counts


def counts(axes: dict[str, int]) -> Counts:
    return Counts(flops={{}}, bytes=0.0)
'''


def render_counts(candidate: Candidate) -> str:
    if candidate.counts_source is not None:
        return candidate.counts_source
    return MISSING_COUNTS.format(name=candidate.name, format=candidate.format)


REFERENCE_PY = '''"""{name}: imported from {format} ({upstream}) by `python -m evaluator import-problems`.

Do not edit: the reference is the upstream code in upstream/, and adapter.json says how SOLboard's
contract maps onto it (evaluator/importers/runtime.py, docs/importing.md).
"""

from __future__ import annotations

from evaluator.importers.runtime import adapter_for

_adapter = adapter_for(__file__)
generate_inputs = _adapter.generate_inputs
reference = _adapter.reference
baseline = _adapter.baseline
'''


def render_reference(candidate: Candidate) -> str:
    return REFERENCE_PY.format(name=candidate.name, format=candidate.format, upstream=candidate.upstream_name)
