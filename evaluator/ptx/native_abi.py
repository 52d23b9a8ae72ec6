"""A problem's native ABI in words a kernel author can start from, generated from its definition.

The problem page, the upload form, the API's problem detail and ``solboard problem NAME
--launch-spec`` all show this one description: which languages the problem takes, the kernel's
parameters in the harness's order (a pointer per tensor, then the scalars, then the fp32
constants), which tensors may come as TMA descriptors, the features the features track asks for,
and a launch-spec skeleton with a matching CUDA C++ signature and PTX ``.entry`` that pass
``check-ptx`` as they are (they write nothing: the body is the author's).

It works on plain data (``NativeAbiInput``) so that the site can feed it its database mirror of the
catalogue; ``from_problem`` builds that from a catalogue ``Problem``. No torch, no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from evaluator.ptx.abi import DEFAULT_ARCHS

#: C++ element type and PTX-side description of each catalogue dtype.
C_TYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "float8_e4m3fn": "__nv_fp8_e4m3",
    "float8_e5m2": "__nv_fp8_e5m2",
    "int32": "int",
    "int64": "long long",
    "float64": "double",
    "int16": "short",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
}
#: C++ keywords a tensor or axis name may be (imported problems name them after their source):
#: such a parameter gets a trailing underscore in the skeleton's signature.
_CPP_KEYWORDS = frozenset({
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
    "constexpr", "continue", "decltype", "default", "delete", "do", "double", "else", "enum", "explicit",
    "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
    "namespace", "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public",
    "register", "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this",
    "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "while", "xor",
})
_U32_MAX = 2**32 - 1
_GRID_X_MAX = 2**31 - 1
_THREADS = 256
NATIVE = ("ptx", "cuda")


@dataclass(frozen=True)
class NativeAbiInput:
    """What the description is made from: the problem's definition as plain data."""

    name: str
    kind: str
    axes: list[str]
    inputs: list[dict[str, Any]]  # {"name", "shape", "dtype"}
    outputs: list[dict[str, Any]]
    languages: list[str]
    ptx: dict[str, Any]  # the [ptx] table without required_features
    required_features: dict[str, list[str]]
    shapes: list[dict[str, int]]


@dataclass(frozen=True)
class NativeParam:
    """One kernel parameter of the canonical order."""

    position: int
    kind: str  # ptr, u32, u64, f32
    name: str  # the C++/PTX parameter name the skeleton uses
    tensor: str | None = None
    role: str | None = None  # input, output
    dtype: str | None = None
    shape: list[str | int] | None = None
    tensormap_allowed: bool = False
    axis: str | None = None
    constant: str | None = None
    value: float | None = None  # f32: the constant's value
    c_type: str = ""


@dataclass(frozen=True)
class NativeAbi:
    problem: str
    languages: list[str]
    native: bool  # takes ptx or cuda
    reason: str  # why it does not, when it does not
    parameters: list[NativeParam] = field(default_factory=list)
    tensormaps: list[str] = field(default_factory=list)
    constants: dict[str, float] = field(default_factory=dict)
    archs: list[str] = field(default_factory=list)
    required_features: dict[str, list[str]] = field(default_factory=dict)
    launch_spec: str = ""  # TOML, as the API's launch_spec field takes it
    cuda_skeleton: str = ""  # a .cu file: the launch block, then the signature
    ptx_skeleton: str = ""  # a .ptx file: the launch block, then the .entry

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_problem(problem: Any) -> NativeAbiInput:
    """The input of a catalogue ``evaluator.problems.Problem``."""
    ptx = dict(problem.ptx or {})
    required = ptx.pop("required_features", {})

    def tensor(t: Any) -> dict[str, Any]:
        return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype}

    return NativeAbiInput(
        name=problem.name, kind=problem.kind, axes=list(problem.axes),
        inputs=[tensor(t) for t in problem.inputs], outputs=[tensor(t) for t in problem.outputs],
        languages=list(problem.languages), ptx=ptx, required_features=required,
        shapes=[dict(shape.axes) for shape in problem.shapes],
    )


def describe(source: NativeAbiInput) -> NativeAbi:
    """The problem's native ABI, with skeletons; ``native`` False (and why) where it takes neither."""
    native = [language for language in source.languages if language in NATIVE]
    if not native:
        why = ("a multi-GPU problem: native kernels are not offered for it" if source.kind == "multi"
               else "this problem takes Python kernels only")
        return NativeAbi(problem=source.name, languages=list(source.languages), native=False, reason=why)
    parameters = _parameters(source)
    spec = _launch_spec(source, parameters)
    return NativeAbi(
        problem=source.name, languages=list(source.languages), native=True, reason="",
        parameters=parameters, tensormaps=list(source.ptx.get("tensormaps", [])),
        constants={k: float(v) for k, v in source.ptx.get("constants", {}).items()},
        archs=list(source.ptx.get("archs", DEFAULT_ARCHS)),
        required_features={arch: list(features) for arch, features in source.required_features.items()},
        launch_spec=spec, cuda_skeleton=_cuda_skeleton(source, parameters, spec),
        ptx_skeleton=_ptx_skeleton(source, parameters, spec),
    )


def _parameters(source: NativeAbiInput) -> list[NativeParam]:
    allowed = source.ptx.get("tensors")
    tensormaps = set(source.ptx.get("tensormaps", []))
    tensors = [(t, "input") for t in source.inputs] + [(t, "output") for t in source.outputs]
    params: list[NativeParam] = []
    for tensor, role in tensors:
        if allowed is not None and tensor["name"] not in allowed:
            continue
        const = "const " if role == "input" else ""
        params.append(
            NativeParam(
                position=len(params),
                kind="ptr",
                name=_c_name(tensor["name"]),
                tensor=tensor["name"],
                role=role,
                dtype=tensor["dtype"],
                shape=list(tensor["shape"]),
                tensormap_allowed=tensor["name"] in tensormaps,
                c_type=f"{const}{C_TYPES[tensor['dtype']]}* __restrict__",
            )
        )
    taken = {p.name for p in params}
    for axis in source.ptx.get("scalars", source.axes):
        kind = "u32" if max((shape.get(axis, 0) for shape in source.shapes), default=0) <= _U32_MAX else "u64"
        name = _c_name(axis) if axis not in taken else f"{axis}_value"
        params.append(NativeParam(position=len(params), kind=kind, name=name, axis=axis,
                                  c_type="unsigned" if kind == "u32" else "unsigned long long"))
    for constant, value in source.ptx.get("constants", {}).items():
        params.append(NativeParam(position=len(params), kind="f32", name=_c_name(constant), constant=constant,
                                  value=float(value), c_type="float"))
    return params


def _c_name(name: str) -> str:
    return f"{name}_" if name in _CPP_KEYWORDS else name


def _numel(shape: list[str | int]) -> str:
    return " * ".join(str(d) if isinstance(d, int) or d.isidentifier() else f"({d})" for d in shape) or "1"


def _grid(source: NativeAbiInput) -> str:
    """One thread per element of the first output (or more elements per thread where the grid
    would get too long), so the skeleton's grid is launchable on every shape."""
    first = source.outputs[0]["shape"] if source.outputs else [1]
    numel = _numel(first)
    largest = max((_evaluate(first, axes) for axes in source.shapes), default=1)
    per_block = _THREADS
    while -(-largest // per_block) > _GRID_X_MAX:
        per_block *= 4
    return f'"cdiv({numel}, {per_block})"'


def _evaluate(shape: list[str | int], axes: dict[str, int]) -> int:
    from evaluator.problems import TensorSpec

    total = 1
    for dim in TensorSpec("t", tuple(shape), "float32").concrete_shape(axes):
        total *= dim
    return total


def _param_toml(param: NativeParam) -> str:
    if param.kind == "ptr":
        return f'{{kind="ptr", tensor="{param.tensor}"}}'
    if param.kind == "f32":
        return f'{{kind="f32", constant="{param.constant}"}}'
    return f'{{kind="{param.kind}", axis="{param.axis}"}}'


def _launch_spec(source: NativeAbiInput, parameters: list[NativeParam]) -> str:
    lines = [
        f'entry = "{source.name}_kernel"',
        f"grid = [{_grid(source)}, 1, 1]",
        f"block = [{_THREADS}, 1, 1]",
        "dynamic_smem = 0",
        "params = [",
        *(f"  {_param_toml(p)}," for p in parameters),
        "]",
    ]
    return "\n".join(lines) + "\n"


def _launch_block(spec: str) -> list[str]:
    return ["// solboard-launch:", *(f"// {line}" for line in spec.splitlines())]


def _tensormap_note(source: NativeAbiInput) -> list[str]:
    maps = source.ptx.get("tensormaps", [])
    if not maps:
        return ["// No tensor of this problem may come as a TMA descriptor."]
    return [
        f"// May come as TMA descriptors instead of pointers: {', '.join(maps)} (docs/ptx.md, section 2)."
    ]


def _header(source: NativeAbiInput, spec: str) -> list[str]:
    return [
        f"// {source.name}: a starting point generated from the problem's definition.",
        "// Parameters in the harness's order: a pointer per tensor (inputs, then outputs), then the",
        "// scalars, then the fp32 constants. Drop or reorder them in the spec and the signature alike.",
        *_tensormap_note(source),
        "//",
        *_launch_block(spec),
        "",
    ]


def _cuda_skeleton(source: NativeAbiInput, parameters: list[NativeParam], spec: str) -> str:
    signature = ",\n    ".join(f"{p.c_type} {p.name}" for p in parameters)
    lines = [
        *_header(source, spec),
        "#include <cuda_bf16.h>",
        "#include <cuda_fp16.h>",
        "#include <cuda_fp8.h>",
        "",
        f'extern "C" __global__ void {source.name}_kernel(\n    {signature}) {{',
        "    // Write every element of every output: they are poisoned before each call.",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _ptx_skeleton(source: NativeAbiInput, parameters: list[NativeParam], spec: str) -> str:
    types = {"ptr": ".u64", "u32": ".u32", "u64": ".u64", "f32": ".f32"}
    declared = ",\n".join(f"    .param {types[p.kind]} {source.name}_param_{p.position}" for p in parameters)
    lines = [
        *_header(source, spec),
        ".version 8.0",
        ".target sm_90",
        ".address_size 64",
        "",
        f".visible .entry {source.name}_kernel(\n{declared}\n)",
        "{",
        "    ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"
