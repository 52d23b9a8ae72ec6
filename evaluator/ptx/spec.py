"""The launch spec: which entry to launch, with which grid, block, shared memory, cluster and
parameters. It travels as TOML in a comment block of the source (``// solboard-launch:`` then
``// key = value`` lines, ending at the first line that is not a ``//`` comment or is a bare
``//``), or as a separate text field (plain TOML, without the ``//``). docs/ptx.md describes it.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from typing import Any

from evaluator.ptx.errors import SpecError
from evaluator.ptx.expr import evaluate, parse_expression

MARKER = "solboard-launch:"
INTEGER_KINDS = ("u32", "s32", "u64", "s64")
SCALAR_KINDS = (*INTEGER_KINDS, "f32")
KINDS = ("ptr", "tensormap", *SCALAR_KINDS)
SWIZZLES = ("none", "32B", "64B", "128B")
INTERLEAVES = ("none", "16B", "32B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("none", "nan")
_TOP_KEYS = {"entry", "grid", "block", "dynamic_smem", "cluster", "params"}
_PARAM_KEYS = {
    "ptr": {"kind", "tensor"},
    "tensormap": {"kind", "tensor", "box", "swizzle", "interleave", "l2_promotion", "oob_fill"},
    **{kind: {"kind", "axis", "value"} for kind in INTEGER_KINDS},
    "f32": {"kind", "constant"},
}

Expr = ast.expr | int


@dataclass(frozen=True)
class ParamSpec:
    kind: str
    tensor: str | None = None
    value: Expr | None = None  # integer scalars: an axis name or an expression over the axes
    value_text: str = ""  # integer scalars: the expression as written; f32: the constant's name
    constant: str | None = None  # f32: a name from the problem's [ptx.constants]
    box: tuple[int, ...] = ()  # tensormap: TMA order, innermost (contiguous) dimension first
    swizzle: str = "none"
    interleave: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "none"


@dataclass(frozen=True)
class LaunchSpec:
    entry: str
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    dynamic_smem: Expr
    cluster: tuple[int, int, int] | None
    params: tuple[ParamSpec, ...]
    raw: dict[str, Any] = field(default_factory=dict)

    def grid_for(self, axes: dict[str, int]) -> tuple[int, int, int]:
        return _triple(self.grid, axes, "grid")

    def block_for(self, axes: dict[str, int]) -> tuple[int, int, int]:
        return _triple(self.block, axes, "block")

    def smem_for(self, axes: dict[str, int]) -> int:
        return evaluate(self.dynamic_smem, axes, "dynamic_smem")

    def scalar_for(self, param: ParamSpec, axes: dict[str, int]) -> int:
        assert param.value is not None
        return evaluate(param.value, axes, f"parameter {param.value_text!r}")


def _triple(exprs: tuple[Expr, Expr, Expr], axes: dict[str, int], name: str) -> tuple[int, int, int]:
    x, y, z = (evaluate(e, axes, f"{name}[{i}]") for i, e in enumerate(exprs))
    return x, y, z


def extract_spec_text(source: str) -> str | None:
    """The TOML text of the first ``// solboard-launch:`` block in a source, or None."""
    lines = source.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("//") and stripped[2:].strip() == MARKER:
            return "\n".join(_block_lines(lines[index + 1 :]))
    return None


def _block_lines(lines: list[str]) -> list[str]:
    block = []
    for line in lines:
        stripped = line.strip()
        if not stripped.startswith("//") or stripped == "//":
            break
        body = stripped[2:]
        block.append(body.removeprefix(" "))
    return block


def parse_spec(text: str, axes: tuple[str, ...] | None = None) -> LaunchSpec:
    """Parse and check a spec. With ``axes`` (the problem's), names in expressions are checked."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"launch spec is not valid TOML: {error}") from error
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise SpecError(f"launch spec: unknown key(s) {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    for key in ("entry", "grid", "block", "params"):
        if key not in raw:
            raise SpecError(f"launch spec: missing {key!r}")
    names = axes if axes is not None else _names_in(raw)
    return LaunchSpec(
        entry=_entry(raw["entry"]),
        grid=_dims(raw["grid"], names, "grid"),
        block=_dims(raw["block"], names, "block"),
        dynamic_smem=parse_expression(raw.get("dynamic_smem", 0), names, "dynamic_smem"),
        cluster=_cluster(raw.get("cluster")),
        params=tuple(_param(p, i, names) for i, p in enumerate(_param_list(raw["params"]))),
        raw=raw,
    )


def _names_in(raw: dict[str, Any]) -> tuple[str, ...]:
    """Without a problem every identifier is taken for an axis: only the syntax is checked."""
    texts: list[str] = []
    for key in ("grid", "block"):
        texts += [v for v in raw.get(key, []) if isinstance(v, str)] if isinstance(raw.get(key), list) else []
    texts += [raw["dynamic_smem"]] if isinstance(raw.get("dynamic_smem"), str) else []
    for param in raw.get("params", []) if isinstance(raw.get("params"), list) else []:
        if isinstance(param, dict):
            texts += [v for k, v in param.items() if k in ("axis", "value") and isinstance(v, str)]
    names: set[str] = set()
    for text in texts:
        try:
            names |= {n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)}
        except SyntaxError:
            continue
    return tuple(sorted(names - {"ceil", "floor", "cdiv", "min", "max"}))


def _entry(value: Any) -> str:
    if not isinstance(value, str) or not value.replace("_", "a").replace("$", "a").isalnum():
        raise SpecError(f"launch spec: entry must be a kernel name, got {value!r}")
    return value


def _dims(value: Any, axes: tuple[str, ...], name: str) -> tuple[Expr, Expr, Expr]:
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        raise SpecError(f"launch spec: {name} must be a list of 1 to 3 integers or expressions")
    padded = list(value) + [1] * (3 - len(value))
    x, y, z = (parse_expression(v, axes, f"{name}[{i}]") for i, v in enumerate(padded))
    return x, y, z


def _cluster(value: Any) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= 3 or not all(_is_int(v) for v in value):
        raise SpecError(f"launch spec: cluster must be a list of 1 to 3 integers, got {value!r}")
    x, y, z = (list(value) + [1] * (3 - len(value)))[:3]
    if min(x, y, z) < 1 or x * y * z > 8:
        raise SpecError(f"launch spec: cluster {value} must have positive dims and at most 8 blocks")
    return None if (x, y, z) == (1, 1, 1) else (x, y, z)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _param_list(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise SpecError('launch spec: params must be a list of tables like {kind="ptr", tensor="a"}')
    return value


def _param(raw: dict[str, Any], index: int, axes: tuple[str, ...]) -> ParamSpec:
    where = f"params[{index}]"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise SpecError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = set(raw) - _PARAM_KEYS[kind]
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {sorted(unknown)} for kind {kind!r}")
    if kind == "f32":
        return _constant_param(raw, where)
    if kind in INTEGER_KINDS:
        return _scalar_param(raw, kind, axes, where)
    tensor = raw.get("tensor")
    if not isinstance(tensor, str):
        raise SpecError(f'{where}: a {kind} parameter needs tensor = "<name>"')
    if kind == "ptr":
        return ParamSpec(kind=kind, tensor=tensor)
    return _tensormap_param(raw, tensor, where)


def _scalar_param(raw: dict[str, Any], kind: str, axes: tuple[str, ...], where: str) -> ParamSpec:
    if ("axis" in raw) == ("value" in raw):
        raise SpecError(f'{where}: a {kind} parameter needs exactly one of axis = "N" or value = ...')
    text = raw.get("axis", raw.get("value"))
    if not isinstance(text, (str, int)) or isinstance(text, bool):
        raise SpecError(
            f"{where}: axis/value must be a name, an integer or an expression string, got {text!r}"
        )
    if "axis" in raw and text not in axes:
        raise SpecError(f"{where}: unknown axis {text!r}; axes are {', '.join(axes)}")
    return ParamSpec(kind=kind, value=parse_expression(text, axes, where), value_text=str(text))


def _constant_param(raw: dict[str, Any], where: str) -> ParamSpec:
    """An fp32 parameter carries one of the problem's named constants (eps, softmax_scale), never
    an expression: the problem says which real numbers its kernels may be given."""
    name = raw.get("constant")
    if not isinstance(name, str) or not name.isidentifier():
        raise SpecError(
            f'{where}: an f32 parameter needs constant = "<name>" (one of the problem\'s constants)'
        )
    return ParamSpec(kind="f32", value_text=name, constant=name)


def _tensormap_param(raw: dict[str, Any], tensor: str, where: str) -> ParamSpec:
    box = raw.get("box")
    if not isinstance(box, list) or not 1 <= len(box) <= 5 or not all(_is_int(b) for b in box):
        raise SpecError(f"{where}: box must be a list of 1 to 5 integers (innermost dimension first)")
    if not all(1 <= b <= 256 for b in box):
        raise SpecError(f"{where}: every box dimension must be between 1 and 256, got {box}")
    options = {}
    for key, allowed in (
        ("swizzle", SWIZZLES),
        ("interleave", INTERLEAVES),
        ("l2_promotion", L2_PROMOTIONS),
        ("oob_fill", OOB_FILLS),
    ):
        options[key] = raw.get(key, "none")
        if options[key] not in allowed:
            raise SpecError(f"{where}: {key} must be one of {', '.join(allowed)}, got {options[key]!r}")
    return ParamSpec(kind="tensormap", tensor=tensor, box=tuple(box), **options)


def spec_summary(spec: LaunchSpec) -> dict[str, Any]:
    """A JSON-able echo of the parsed spec (expressions as text)."""

    def text(e: Any) -> Any:
        return e if isinstance(e, int) else ast.unparse(e)

    return {
        "entry": spec.entry,
        "grid": [text(e) for e in spec.grid],
        "block": [text(e) for e in spec.block],
        "dynamic_smem": text(spec.dynamic_smem),
        "cluster": list(spec.cluster) if spec.cluster else None,
        "params": [_param_summary(p) for p in spec.params],
    }


def _param_summary(param: ParamSpec) -> dict[str, Any]:
    if param.kind == "ptr":
        return {"kind": "ptr", "tensor": param.tensor}
    if param.kind == "tensormap":
        return {
            "kind": "tensormap",
            "tensor": param.tensor,
            "box": list(param.box),
            "swizzle": param.swizzle,
            "interleave": param.interleave,
            "l2_promotion": param.l2_promotion,
            "oob_fill": param.oob_fill,
        }
    if param.kind == "f32":
        return {"kind": "f32", "constant": param.constant}
    return {"kind": param.kind, "value": param.value_text}
