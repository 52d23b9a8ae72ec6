"""The torch side of imported problems: what their generated ``reference.py`` calls.

An imported problem's folder holds the source benchmark's files under ``upstream/`` and an
``adapter.json`` that says how SOLboard's contract maps onto them; ``reference.py`` is three lines
that build one adapter and expose its ``generate_inputs``, ``reference`` and ``baseline``:

- ``SolExecBenchAdapter``: a SOL-ExecBench definition. ``run(*inputs)`` is the reference; random
  inputs are drawn as SOL-ExecBench draws them (its name heuristics included), from SOLboard's
  seeded generators; custom inputs come from the definition's ``custom_inputs_entrypoint``.
- ``ReferenceKernelsAdapter``: a GPU MODE reference-kernels task. ``generate_input(**spec)`` makes
  the inputs (and, in the newer tasks, the output buffers, which SOLboard allocates itself),
  ``ref_kernel(data)`` is the reference.

The reference is the upstream one, in its own precision (cast to float64 afterwards), not an fp64
recomputation; the baseline is the same function, its results copied into the outputs.

Upstream code is loaded from ``upstream/`` with that folder first on ``sys.path`` (so
``from utils import ...`` and ``from task import ...`` find the task's own files), and the bare
names it brings into ``sys.modules`` are removed again afterwards, so two imported problems never
share a ``utils``. Its device literals (``"cuda"``) were rewritten by the converter into the name
``_SOLBOARD_DEVICE``, which the adapter sets to the device of each call: the same code draws its
inputs on the GPU of a runner and on the CPU of the development device.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from evaluator.importers.common import DEVICE_NAME
from evaluator.problems import Problem, load_problem
from evaluator.problems._sampling import derived_seed

#: What the converter writes next to problem.toml.
ADAPTER_FILE = "adapter.json"
UPSTREAM_DIR = "upstream"
#: Seeds handed to upstream generators stay below 2^31 (some pass them to numpy or random).
SEED_MASK = 2**31 - 1


# ---------------------------------------------------------------- upstream modules


def load_upstream(folder: Path, relative: str) -> tuple[ModuleType, list[ModuleType]]:
    """The upstream module at ``folder/relative`` and every module of its folder it imported.

    Loaded once per file (cached in ``sys.modules`` under a private name); the folder's bare
    module names (``utils``, ``task``) are only visible while it loads.
    """
    path = (folder / relative).resolve()
    key = "_solboard_upstream_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    if key in sys.modules:
        module = sys.modules[key]
        return module, list(getattr(module, "_solboard_family", [module]))
    home = path.parent
    local_names = {item.stem for item in home.glob("*.py")}
    saved = {name: sys.modules.pop(name) for name in local_names if name in sys.modules}
    sys.path.insert(0, str(home))
    try:
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        setattr(module, DEVICE_NAME, _default_device())
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(key, None)
            raise
        family = [module]
        for name in local_names:
            helper = sys.modules.get(name)
            if helper is not None and Path(getattr(helper, "__file__", "") or "").resolve().parent == home:
                family.append(helper)
        module._solboard_family = family  # type: ignore[attr-defined]
        return module, family
    finally:
        if str(home) in sys.path:
            sys.path.remove(str(home))
        for name in local_names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@contextmanager
def on_device(modules: list[ModuleType], device: str | torch.device, seed: int | None = None) -> Iterator[None]:
    """Upstream code runs with its device name set to ``device`` and, when ``seed`` is given, with
    the global generators seeded from it and restored afterwards (upstream code that draws from
    torch's global generator stays deterministic and leaves the caller's streams alone)."""
    name = str(torch.device(device))
    for module in modules:
        if hasattr(module, DEVICE_NAME):
            setattr(module, DEVICE_NAME, name)
    dev = torch.device(device)
    with _cublas_deterministic(dev.type == "cuda"):
        if seed is None:
            yield
            return
        cuda = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            yield


#: What torch asks for before a cuBLAS call under ``torch.use_deterministic_algorithms(True)``,
#: which the reference-kernels helpers switch on (their DeterministicContext): one of the two
#: settings cuBLAS documents for reproducible results (8 workspaces of 4 MiB). Not yet run on a GPU.
CUBLAS_DETERMINISTIC = ":4096:8"


@contextmanager
def _cublas_deterministic(on_cuda: bool) -> Iterator[None]:
    """CUBLAS_WORKSPACE_CONFIG set for the duration of an upstream call on CUDA when it is unset
    (GPU MODE's runners set it; SOLboard's evaluator processes do not)."""
    if not on_cuda or os.environ.get("CUBLAS_WORKSPACE_CONFIG"):
        yield
        return
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC
    try:
        yield
    finally:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def flatten(value: Any, container: str, count: int, what: str) -> list[Any]:
    """A tensor (``container = "tensor"``) or a tuple/list of ``count`` items, as a list."""
    if container == "tensor":
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise ValueError(f"{what}: expected a {container} of {count} items, got {type(value).__name__}")
    return list(value)


def rebuild(items: list[Any], container: str) -> Any:
    if container == "tensor":
        return items[0]
    return tuple(items) if container == "tuple" else list(items)


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


class _Adapter:
    def __init__(self, reference_file: str | Path) -> None:
        self.folder = Path(reference_file).resolve().parent
        self.spec: dict[str, Any] = json.loads((self.folder / ADAPTER_FILE).read_text())
        self.problem: Problem = load_problem(self.folder)
        self._loaded: tuple[ModuleType, list[ModuleType]] | None = None

    @property
    def upstream(self) -> ModuleType:
        return self._load()[0]

    @property
    def family(self) -> list[ModuleType]:
        return self._load()[1]

    def _load(self) -> tuple[ModuleType, list[ModuleType]]:
        if self._loaded is None:
            self._loaded = load_upstream(self.folder, self.spec["upstream"])
        return self._loaded

    def _seed(self, seed: int, distribution: str, axes: dict[str, int], name: str) -> int:
        return derived_seed(seed, distribution, axes, name) & SEED_MASK

    def _output(self, name: str, value: Any, like: torch.Tensor | None) -> torch.Tensor:
        spec = next(item for item in self.problem.outputs if item.name == name)
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (bool, int, float)):
            device = like.device if like is not None else "cpu"
            return torch.tensor(value, dtype=getattr(torch, spec.dtype), device=device)
        raise ValueError(f"output {name}: the reference returned a {type(value).__name__}")


# ---------------------------------------------------------------- SOL-ExecBench


class SolExecBenchAdapter(_Adapter):
    """A SOL-ExecBench definition: ``run(*inputs) -> outputs`` (adapter.json, docs/importing.md)."""

    def _call_args(self, tensors: dict[str, torch.Tensor], axes: dict[str, int]) -> list[Any]:
        args: list[Any] = []
        for parameter in self.spec["parameters"]:
            kind = parameter["kind"]
            if kind == "tensor":
                args.append(tensors[parameter["name"]])
            elif kind == "fixed":
                args.append(parameter["value"])
            else:  # an integer or boolean scalar carried as an axis
                value = int(axes[parameter["axis"]])
                args.append(bool(value) if parameter.get("type") == "bool" else value)
        return args

    def _scalars(self, axes: dict[str, int]) -> dict[str, Any]:
        scalars: dict[str, Any] = {}
        for parameter in self.spec["parameters"]:
            if parameter["kind"] == "fixed":
                scalars[parameter["name"]] = parameter["value"]
            elif parameter["kind"] == "axis":
                scalars[parameter["name"]] = int(axes[parameter["axis"]])
        return scalars

    def _named(self, result: Any, like: torch.Tensor | None) -> dict[str, torch.Tensor]:
        names = list(self.spec["outputs"])
        if isinstance(result, dict):
            missing = [name for name in names if name not in result]
            if missing:
                raise ValueError(f"the reference returned no {missing}")
            return {name: self._output(name, result[name], like) for name in names}
        if isinstance(result, (tuple, list)):
            if len(result) != len(names):
                raise ValueError(f"the reference returned {len(result)} values for outputs {names}")
            return {name: self._output(name, value, like) for name, value in zip(names, result)}
        if len(names) != 1:
            raise ValueError(f"the reference returned one value for outputs {names}")
        return {names[0]: self._output(names[0], result, like)}

    def generate_inputs(
        self, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "upstream"
    ) -> dict[str, torch.Tensor]:
        if distribution not in self.problem.distributions:
            raise ValueError(f"{self.problem.name} has no distribution {distribution!r}")
        specs = {item["name"]: item for item in self.spec["parameters"] if item["kind"] == "tensor"}
        custom: dict[str, Any] = {}
        if any(item["source"] == "custom" for item in specs.values()):
            entry = getattr(self.upstream, self.spec["custom_entrypoint"])
            with on_device(self.family, device, self._seed(seed, distribution, axes, "custom_inputs")):
                custom = dict(entry({**axes, **self._scalars(axes)}, torch.device(device)))
        inputs: dict[str, torch.Tensor] = {}
        for spec in self.problem.inputs:
            item = specs[spec.name]
            shape = spec.concrete_shape(axes)
            dtype = getattr(torch, spec.dtype)
            if item["source"] == "custom":
                if not isinstance(custom.get(spec.name), torch.Tensor):
                    raise ValueError(f"custom_inputs_entrypoint gave no tensor {spec.name!r}")
                tensor = custom[spec.name].to(device)
            else:
                gen = torch.Generator(device=device)
                gen.manual_seed(derived_seed(seed, distribution, axes, spec.name))
                tensor = random_input(
                    spec.name, shape, dtype, device, gen, item.get("description"), self.spec.get("op_type")
                )
            inputs[spec.name] = tensor.contiguous()
        return inputs

    def reference(self, inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
        like = next(iter(inputs.values()), None)
        with on_device(self.family, like.device if like is not None else "cpu"), torch.no_grad():
            result = self.upstream.run(*self._call_args(inputs, axes))
        return {name: value.to(torch.float64) for name, value in self._named(result, like).items()}

    def baseline(self, *tensors: torch.Tensor, **scalars: int) -> None:
        count = len(self.problem.inputs)
        inputs = {spec.name: tensor for spec, tensor in zip(self.problem.inputs, tensors[:count])}
        outputs = dict(zip((spec.name for spec in self.problem.outputs), tensors[count:]))
        like = tensors[0] if tensors else None
        with on_device(self.family, like.device if like is not None else "cpu"), torch.no_grad():
            result = self.upstream.run(*self._call_args(inputs, scalars))
        for name, value in self._named(result, like).items():
            if not _same_memory(value, outputs[name]):
                outputs[name].copy_(value)


# SOL-ExecBench's random inputs (its core/bench/io.py): randn for floats, fp8 from clamped fp32,
# integers in a fixed range, and name heuristics for inputs whose meaning the name gives away.
_INT_RANGES = {torch.int8: (-128, 128), torch.int16: (-1024, 1024), torch.int32: (-1024, 1024),
               torch.int64: (-1024, 1024)}
_WEIGHT_SUFFIXES = ("_weight", "_weights", "_proj", "_projs", "_proj_weight", "_proj_weights", "_weight_matrix")
_NORM_SUFFIXES = ("_norm", "_layernorm", "layernorm")
_MASK_NAMES = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_COS_SIN = ("cos", "sin", "cos_cached", "sin_cached", "rope_cos", "rope_sin")
_POSITIVE = ("rstd", "std", "variance", "var")


def _is_norm_param(name: str, suffix: str) -> bool:
    if name == f"norm{suffix}":
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    return prefix.endswith(_NORM_SUFFIXES) or prefix.rstrip("0123456789").endswith(("norm", "layernorm"))


def _is_weight_matrix(name: str, shape: tuple[int, ...]) -> bool:
    if len(shape) < 2:
        return False
    stripped = name.rstrip("0123456789")
    return name.endswith(_WEIGHT_SUFFIXES) or name == "weight" or stripped == "weight" or stripped.endswith(
        _WEIGHT_SUFFIXES
    )


def _heuristic(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, device: Any, gen: torch.Generator, text: str
) -> torch.Tensor | None:
    def randn(*, like: torch.dtype = dtype) -> torch.Tensor:
        return torch.randn(shape, dtype=like, device=device, generator=gen)

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=device).uniform_(low, high, generator=gen)

    if _is_norm_param(name, "_weight"):
        return torch.ones(shape, dtype=dtype, device=device)
    if _is_norm_param(name, "_bias"):
        return torch.zeros(shape, dtype=dtype, device=device)
    causal = name in ("attention_mask", "causal_mask") or ("attention mask" in text and "causal" in text)
    if len(shape) >= 2 and shape[-1] == shape[-2] and causal:
        mask = torch.zeros(shape, dtype=dtype, device=device)
        upper = torch.triu(torch.ones(shape[-1], shape[-1], device=device), diagonal=1).bool()
        mask[..., upper] = torch.finfo(dtype).min
        return mask
    binary_words = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
    if name in _MASK_NAMES or (name.endswith("_mask") and any(word in text for word in binary_words)):
        return torch.randint(0, 2, shape, device=device, generator=gen).to(dtype)
    if name in _COS_SIN:
        angle = randn(like=torch.float32).clamp_(-math.pi, math.pi)
        return (torch.cos(angle) if "cos" in name else torch.sin(angle)).to(dtype)
    stripped = name.rstrip("0123456789")
    if name in _POSITIVE or name.endswith(("_rstd", "_std", "_variance", "_var")) or stripped in _POSITIVE or (
        stripped.endswith(("_rstd", "_std", "_var"))
    ):
        return randn().abs() + 0.1
    decay = {"A_cumsum": (-0.1, 0.0), "A_log": (-5.0, -1.0), "A": (-1.0, -0.001), "g": (-5.0, 0.0)}
    if name in decay:
        values = uniform(*decay[name])
        return values.cumsum(dim=-1) if name == "A_cumsum" else values
    softmax_out = name in ("attn_weights", "attention_weights", "routing_weights") or (
        "softmax" in text and "output" in text
    )
    if softmax_out:
        return torch.softmax(randn(like=torch.float32), dim=-1).to(dtype)
    if _is_weight_matrix(name, shape):
        return randn() / math.sqrt(shape[-1])
    return None


def random_input(
    name: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str | torch.device,
    gen: torch.Generator,
    description: str | None = None,
    op_type: str | None = None,
) -> torch.Tensor:
    """One ``random`` input the way SOL-ExecBench draws it, from ``gen``."""
    value = None
    if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        value = _heuristic(name, shape, dtype, device, gen, (description or "").lower())
    if value is None:
        if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            value = torch.randn(shape, dtype=dtype, device=device, generator=gen)
        elif dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            value = torch.randn(shape, dtype=torch.float32, device=device, generator=gen).clamp_(-2.0, 2.0).to(dtype)
        elif dtype is torch.bool:
            value = torch.randint(0, 2, shape, device=device, generator=gen).to(torch.bool)
        elif dtype in _INT_RANGES:
            low, high = _INT_RANGES[dtype]
            value = torch.randint(low, high, shape, dtype=dtype, device=device, generator=gen)
        else:
            raise ValueError(f"input {name}: no random values for {dtype}")
    if op_type == "sampling" and name == "probs":
        value = torch.softmax(value, dim=-1)
    return value


# ---------------------------------------------------------------- GPU MODE reference-kernels


class ReferenceKernelsAdapter(_Adapter):
    """A reference-kernels task: ``generate_input(**spec) -> data``, ``ref_kernel(data) -> output``."""

    def _kwargs(self, axes: dict[str, int], seed: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for parameter in self.spec["parameters"]:
            kind = parameter["kind"]
            if kind == "seed":
                kwargs[parameter["name"]] = seed
            elif kind == "fixed":
                kwargs[parameter["name"]] = parameter["value"]
            else:
                value = int(axes[parameter["axis"]])
                kwargs[parameter["name"]] = bool(value) if parameter.get("type") == "bool" else value
        return kwargs

    def upstream_data(self, axes: dict[str, int], seed: int, device: str | torch.device) -> Any:
        """The upstream ``generate_input`` result, drawn on ``device`` with this (upstream) seed."""
        generate = getattr(self.upstream, self.spec.get("generate", "generate_input"))
        with on_device(self.family, device, seed), torch.no_grad():
            return generate(**self._kwargs(axes, seed))

    def generate_inputs(
        self, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "upstream"
    ) -> dict[str, torch.Tensor]:
        if distribution not in self.problem.distributions:
            raise ValueError(f"{self.problem.name} has no distribution {distribution!r}")
        data = self.upstream_data(axes, self._seed(seed, distribution, axes, "generate_input"), device)
        layout = self.spec["data"]
        items = flatten(data, layout["container"], len(layout["slots"]), "generate_input")
        inputs = {}
        for slot, item in zip(layout["slots"], items):
            if slot["role"] == "input":
                if not isinstance(item, torch.Tensor):
                    raise ValueError(f"generate_input: {slot['name']} is a {type(item).__name__}, not a tensor")
                inputs[slot["name"]] = item.to(device).contiguous()
        return inputs

    def _call(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]) -> dict[str, Any]:
        layout, result_layout = self.spec["data"], self.spec["result"]
        items = [inputs[slot["name"]] if slot["role"] == "input" else outputs[slot["name"]] for slot in layout["slots"]]
        like = next(iter(inputs.values()), None)
        reference = getattr(self.upstream, self.spec.get("reference", "ref_kernel"))
        with on_device(self.family, like.device if like is not None else "cpu"), torch.no_grad():
            result = reference(rebuild(items, layout["container"]))
        names = result_layout["outputs"]
        values = flatten(result, result_layout["container"], len(names), "ref_kernel")
        named = {name: self._output(name, value, like) for name, value in zip(names, values)}
        for name, value in named.items():  # a result of shape () for a buffer of shape (1,)
            buffer = outputs[name]
            if value.shape != buffer.shape and value.numel() == buffer.numel():
                named[name] = value.reshape(buffer.shape)
        return named

    def _buffers(self, axes: dict[str, int], device: torch.device) -> dict[str, torch.Tensor]:
        return {
            spec.name: torch.zeros(spec.concrete_shape(axes), dtype=getattr(torch, spec.dtype), device=device)
            for spec in self.problem.outputs
        }

    def reference(self, inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
        device = next(iter(inputs.values())).device if inputs else torch.device("cpu")
        results = self._call(inputs, self._buffers(axes, device))
        return {name: value.to(torch.float64) for name, value in results.items()}

    def baseline(self, *tensors: torch.Tensor, **scalars: int) -> None:
        count = len(self.problem.inputs)
        inputs = {spec.name: tensor for spec, tensor in zip(self.problem.inputs, tensors[:count])}
        outputs = dict(zip((spec.name for spec in self.problem.outputs), tensors[count:]))
        for name, value in self._call(inputs, outputs).items():
            if not _same_memory(value, outputs[name]):
                outputs[name].copy_(value)


ADAPTERS: dict[str, type[_Adapter]] = {
    "sol-execbench": SolExecBenchAdapter,
    "reference-kernels": ReferenceKernelsAdapter,
}


def adapter_for(reference_file: str | Path) -> _Adapter:
    """The adapter an imported problem's ``reference.py`` builds (its format from adapter.json)."""
    folder = Path(reference_file).resolve().parent
    fmt = json.loads((folder / ADAPTER_FILE).read_text())["format"]
    return ADAPTERS[fmt](reference_file)
