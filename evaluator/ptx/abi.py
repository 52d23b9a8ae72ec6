"""The problem's parameter ABI, the entries a PTX module declares, and the check of a launch
spec against both.

A problem's ``[ptx]`` table (problem.toml) declares what a PTX/CUDA kernel of that problem may be
given and which architecture features the ranking filter asks for::

    [ptx]
    tensors = ["A", "B", "C"]              # tensors a pointer may name (default: inputs+outputs)
    scalars = ["M", "N", "K"]              # axes a scalar parameter may carry (default: all)
    tensormaps = ["A", "B", "C"]           # tensors that may be passed as TMA tensor maps (default: none)
    archs = ["sm_90a", "sm_100a"]          # targets accepted (default: both)
    [ptx.constants]
    eps = 1e-6                             # real numbers an f32 parameter may carry by name
    [ptx.required_features]
    sm_90a = ["wgmma", "tma"]              # a ranking filter, not a failure: reported as missing
    sm_100a = ["tcgen05", "tma"]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from evaluator.ptx.errors import SpecError
from evaluator.ptx.spec import LaunchSpec, ParamSpec

DEFAULT_ARCHS = ("sm_90a", "sm_100a")
DTYPE_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int32": 4,
    "int64": 8,
    "float64": 8,
}
_SCALAR_TYPES = {
    "b8": 1,
    "u8": 1,
    "s8": 1,
    "b16": 2,
    "u16": 2,
    "s16": 2,
    "f16": 2,
    "bf16": 2,
    "b32": 4,
    "u32": 4,
    "s32": 4,
    "f32": 4,
    "b64": 8,
    "u64": 8,
    "s64": 8,
    "f64": 8,
}
_INTEGER_TYPES = {4: ("b32", "u32", "s32"), 8: ("b64", "u64", "s64")}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[str | int, ...]  # axis names, literal sizes or the catalogue's dim expressions
    dtype: str
    is_output: bool

    def concrete_shape(self, axes: dict[str, int]) -> tuple[int, ...]:
        """The sizes on one shape (``K/128``, ``2*I``, ``G+1`` as the catalogue reads them)."""
        from evaluator.problems import TensorSpec

        return TensorSpec(self.name, self.shape, self.dtype).concrete_shape(axes)


@dataclass(frozen=True)
class ProblemAbi:
    name: str
    axes: tuple[str, ...]  # every axis: grid/block/smem expressions may use them all
    scalars: tuple[str, ...]  # axes a scalar parameter may carry by name
    tensors: dict[str, TensorInfo]
    tensormaps: tuple[str, ...]
    archs: tuple[str, ...]
    required_features: dict[str, tuple[str, ...]] = field(default_factory=dict)
    shapes: tuple[dict[str, int], ...] = ()
    #: Named real numbers an ``f32`` parameter may carry (``[ptx.constants]``: eps, softmax_scale).
    constants: dict[str, float] = field(default_factory=dict)
    #: Every input then every output, in the order the harness hands them to a kernel; ``tensors``
    #: holds the ones a parameter may name.
    every_tensor: dict[str, TensorInfo] = field(default_factory=dict)


def problem_abi(problem: Any) -> ProblemAbi:
    """The ABI of a catalogue ``Problem`` (its ``ptx`` dict is the ``[ptx]`` table)."""
    table: dict[str, Any] = dict(problem.ptx or {})
    specs = [(t, False) for t in problem.inputs] + [(t, True) for t in problem.outputs]
    everything = {t.name: TensorInfo(t.name, tuple(t.shape), t.dtype, out) for t, out in specs}
    allowed = table.get("tensors", list(everything))
    required = {arch: tuple(feats) for arch, feats in table.get("required_features", {}).items()}
    return ProblemAbi(
        name=problem.name,
        axes=tuple(problem.axes),
        scalars=tuple(a for a in problem.axes if a in table.get("scalars", problem.axes)),
        tensors={name: info for name, info in everything.items() if name in allowed},
        tensormaps=tuple(table.get("tensormaps", [])),
        archs=tuple(table.get("archs", DEFAULT_ARCHS)),
        required_features=required,
        shapes=tuple(dict(s.axes) for s in problem.shapes),
        constants={name: float(value) for name, value in table.get("constants", {}).items()},
        every_tensor=everything,
    )


# ---------------------------------------------------------------- PTX entries


@dataclass(frozen=True)
class PtxParam:
    name: str
    type: str  # b8, u32, u64, ...
    align: int | None
    count: int  # array length; 1 for a plain scalar
    is_array: bool

    @property
    def size(self) -> int:
        return _SCALAR_TYPES.get(self.type, 0) * self.count

    def describe(self) -> str:
        align = f".align {self.align} " if self.align else ""
        array = f"[{self.count}]" if self.is_array else ""
        return f"`.param {align}.{self.type} {self.name}{array}`"


@dataclass(frozen=True)
class PtxEntry:
    name: str
    params: tuple[PtxParam, ...]
    reqntid: tuple[int, ...] | None = None
    maxntid: tuple[int, ...] | None = None


_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)([^{]*)\{", re.DOTALL)
_NTID_RE = re.compile(r"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def strip_comments(ptx: str) -> str:
    """PTX without // and /* */ comments, newlines kept so line numbers still match."""
    no_block = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), ptx, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", no_block)


def parse_entries(ptx: str) -> dict[str, PtxEntry]:
    entries = {}
    for match in _ENTRY_RE.finditer(strip_comments(ptx)):
        name, params_text, directives = match.groups()
        params = tuple(_parse_param(p) for p in params_text.split(",") if p.strip())
        ntid = {kind: tuple(int(v) for v in values if v) for kind, *values in _NTID_RE.findall(directives)}
        entries[name] = PtxEntry(name, params, ntid.get("reqntid"), ntid.get("maxntid"))
    return entries


def _parse_param(text: str) -> PtxParam:
    tokens = text.replace("\n", " ").split()
    align = None
    if ".align" in tokens:
        align = int(tokens[tokens.index(".align") + 1])
    types = [t[1:] for t in tokens if t.startswith(".") and t[1:] in _SCALAR_TYPES]
    name_token = tokens[-1]
    array = re.match(r"([\w$]+)\s*\[(\d+)\]", name_token)
    name = array.group(1) if array else name_token
    count = int(array.group(2)) if array else 1
    return PtxParam(name, types[0] if types else "?", align, count, array is not None)


def ptx_version(ptx: str) -> tuple[int, int] | None:
    match = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", strip_comments(ptx), re.MULTILINE)
    return (int(match.group(1)), int(match.group(2))) if match else None


def ptx_target(ptx: str) -> str | None:
    match = re.search(r"^\s*\.target\s+([\w]+)", strip_comments(ptx), re.MULTILINE)
    return match.group(1) if match else None


def resolve_entry(entries: dict[str, PtxEntry], name: str) -> PtxEntry:
    """The entry the spec names; a C++-mangled ``_Z<len><name>...`` matches when it is the only one."""
    if name in entries:
        return entries[name]
    mangled = [e for n, e in entries.items() if n.startswith(f"_Z{len(name)}{name}")]
    if len(mangled) == 1:
        return mangled[0]
    known = ", ".join(sorted(entries)) or "none"
    hint = ' (declare it extern "C" in CUDA C++)' if mangled else ""
    raise SpecError(f"entry {name!r} not found in the PTX{hint}; entries: {known}")


# ---------------------------------------------------------------- checks


def check_params(spec: LaunchSpec, entry: PtxEntry) -> None:
    """The spec's parameters must match the entry's .param list one for one."""
    if len(spec.params) != len(entry.params):
        raise SpecError(
            f"entry {entry.name!r} takes {len(entry.params)} parameter(s) "
            f"({', '.join(p.describe() for p in entry.params) or 'none'}), the spec gives {len(spec.params)}"
        )
    for index, (param, declared) in enumerate(zip(spec.params, entry.params, strict=True)):
        problem = _param_mismatch(param, declared)
        if problem:
            raise SpecError(
                f"params[{index}] ({_label(param)}): {problem}; the PTX declares {declared.describe()}"
            )


def _label(param: ParamSpec) -> str:
    return f"{param.kind} {param.tensor}" if param.tensor else f"{param.kind} {param.value_text}"


def _param_mismatch(param: ParamSpec, declared: PtxParam) -> str | None:
    if param.kind == "tensormap":
        if declared.type != "b8" or declared.count != 128 or not declared.is_array:
            return "a tensor map must be `.param .align 64 .b8 name[128]` (or .align 128)"
        if (declared.align or 1) < 64:
            return "a tensor map parameter needs .align 64 or more"
        return None
    if param.kind == "f32":
        if declared.is_array or declared.type not in ("f32", "b32"):
            return "an f32 constant needs a 4-byte float parameter (.f32/.b32)"
        return None
    wanted = 8 if param.kind in ("ptr", "u64", "s64") else 4
    if declared.is_array or declared.type not in _INTEGER_TYPES[wanted]:
        what = "a pointer" if param.kind == "ptr" else f"a {param.kind} scalar"
        return f"{what} needs a {wanted}-byte integer parameter (.{'/.'.join(_INTEGER_TYPES[wanted])})"
    return None


def check_against_problem(spec: LaunchSpec, abi: ProblemAbi) -> list[str]:
    """Names must exist in the problem; returns warnings (errors raise SpecError)."""
    warnings = []
    named = set()
    for index, param in enumerate(spec.params):
        if param.tensor is None:
            _check_scalar(param, abi, index)
            continue
        if param.tensor not in abi.tensors:
            raise SpecError(
                f"params[{index}]: unknown tensor {param.tensor!r}; {abi.name} has {', '.join(abi.tensors)}"
            )
        if param.kind == "tensormap":
            _check_tensormap(param, abi, index)
        named.add(param.tensor)
    for name, info in abi.tensors.items():
        if name not in named and info.is_output:
            raise SpecError(f"no parameter gives the output {name!r}: the kernel could not write it")
        if name not in named:
            warnings.append(f"no parameter gives the input {name!r}")
    return warnings


def _check_scalar(param: ParamSpec, abi: ProblemAbi, index: int) -> None:
    if param.kind == "f32":
        if param.constant not in abi.constants:
            known = ", ".join(abi.constants) or "none"
            raise SpecError(
                f"params[{index}]: {abi.name} has no constant {param.constant!r} (constants: {known})"
            )
        return
    if param.value_text in abi.axes and param.value_text not in abi.scalars:
        raise SpecError(
            f"params[{index}]: {abi.name} does not pass axis {param.value_text!r} as a scalar "
            f"(allowed: {', '.join(abi.scalars) or 'none'})"
        )


def _check_tensormap(param: ParamSpec, abi: ProblemAbi, index: int) -> None:
    assert param.tensor is not None
    info = abi.tensors[param.tensor]
    if param.tensor not in abi.tensormaps:
        raise SpecError(
            f"params[{index}]: {abi.name} does not allow a tensor map for {param.tensor!r} "
            f"(allowed: {', '.join(abi.tensormaps) or 'none'})"
        )
    if len(param.box) != len(info.shape):
        raise SpecError(
            f"params[{index}]: box {list(param.box)} has {len(param.box)} dims, "
            f"tensor {param.tensor!r} has {len(info.shape)} (give the box innermost first)"
        )
    inner_bytes = param.box[0] * DTYPE_BYTES[info.dtype]
    if param.interleave == "none" and inner_bytes % 16:
        raise SpecError(
            f"params[{index}]: the box's inner dimension is {inner_bytes} bytes; TMA needs a multiple of 16"
        )
    span = {"32B": 32, "64B": 64, "128B": 128}.get(param.swizzle)
    if span and param.interleave == "none" and inner_bytes > span:
        raise SpecError(
            f"params[{index}]: with swizzle {param.swizzle} the box's inner dimension may be "
            f"at most {span} bytes, it is {inner_bytes}"
        )


#: TMA's own limits on a tensor (cuTensorMapEncodeTiled): at most 5 dims, each at most 2^32
#: elements, every row pitch a multiple of 16 bytes below 2^40.
TMA_MAX_RANK = 5
TMA_MAX_DIM = 2**32
TMA_MAX_PITCH = 2**40


def tensormap_unfit(info: TensorInfo, axes: dict[str, int]) -> str | None:
    """Why TMA cannot describe this tensor on this shape, or None when it can."""
    dims = info.concrete_shape(axes)
    if not 1 <= len(dims) <= TMA_MAX_RANK:
        return f"{info.name!r} has {len(dims)} dims; TMA takes 1 to {TMA_MAX_RANK}"
    if any(d > TMA_MAX_DIM for d in dims):
        return f"{info.name!r} has a dim of more than 2^32 elements"
    pitch = DTYPE_BYTES[info.dtype]
    for dim in reversed(dims[1:]):
        pitch *= dim
        if pitch % 16 or pitch >= TMA_MAX_PITCH:
            return (f"a row pitch of {info.name!r} {list(dims)} is {pitch} bytes; TMA needs a multiple of 16 "
                    f"(below 2^40)")
    return None


def check_tensormaps_for_shape(spec: LaunchSpec, abi: ProblemAbi, axes: dict[str, int]) -> None:
    """Every tensor map the spec asks for can be encoded on this shape (else the launch would fail)."""
    for index, param in enumerate(spec.params):
        if param.kind != "tensormap" or param.tensor not in abi.tensors:
            continue
        reason = tensormap_unfit(abi.tensors[param.tensor], axes)
        if reason:
            where = ", ".join(f"{k}={v}" for k, v in axes.items())
            raise SpecError(f"params[{index}]: shape {where}: {reason}")
