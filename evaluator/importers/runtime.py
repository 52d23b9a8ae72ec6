"""The torch side of imported problems: what their generated ``reference.py`` calls.

An imported problem's folder holds the source benchmark's files under ``upstream/`` and an
``adapter.json`` that says how SOLboard's contract maps onto them; ``reference.py`` is a few lines
that build one adapter and expose its ``generate_inputs``, ``reference``, ``baseline`` and
``independent_reference``:

- ``SolExecBenchAdapter`` (``sxb_adapter.py``): a SOL-ExecBench definition. ``run(*inputs)`` is
  the reference; random inputs are drawn as SOL-ExecBench draws them (``sxb_inputs.py``).
- ``ReferenceKernelsAdapter`` (``rk_adapter.py``): a GPU MODE task. ``generate_input(**spec)``
  makes the data (output buffers included, which SOLboard allocates itself), ``ref_kernel(data)``
  is the reference.

The reference is the upstream one, in its own precision (cast to float64 afterwards); the baseline
is the same function, its results copied into the outputs. Because the baseline IS the reference,
the self-check also compares it with ``independent_reference``: the same upstream code on float64
copies of the floating inputs, a second formulation whose difference from the first must fit the
tolerance (else a more accurate kernel than the reference would fail).

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
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from evaluator.importers.common import ADAPTER_FILE, DEVICE_NAME
from evaluator.problems import Problem, load_problem
from evaluator.problems._sampling import derived_seed

UPSTREAM_DIR = "upstream"
#: Seeds handed to upstream generators stay below 2^31 (some pass them to numpy or random).
SEED_MASK = 2**31 - 1
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


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
def on_device(
    modules: list[ModuleType], device: str | torch.device, seed: int | None = None
) -> Iterator[None]:
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
        cuda = (
            [dev.index if dev.index is not None else torch.cuda.current_device()]
            if dev.type == "cuda"
            else []
        )
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


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


def widened(value: Any) -> Any:
    """A float64 copy of a floating tensor (fp8 included); anything else as it is."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
        return value.to(torch.float64)
    return value


class Adapter:
    """What both formats share: the folder, adapter.json, the upstream modules, seeds, outputs."""

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

    def _check_distribution(self, distribution: str) -> None:
        if distribution not in self.problem.distributions:
            raise ValueError(f"{self.problem.name} has no distribution {distribution!r}")

    def _output(self, name: str, value: Any, like: torch.Tensor | None) -> torch.Tensor:
        spec = next(item for item in self.problem.outputs if item.name == name)
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (bool, int, float)):
            device = like.device if like is not None else "cpu"
            return torch.tensor(value, dtype=getattr(torch, spec.dtype), device=device)
        raise ValueError(f"output {name}: the reference returned a {type(value).__name__}")

    def _device_of(self, tensors: Any) -> torch.device:
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor):
                return tensor.device
        return torch.device("cpu")

    def _results(
        self, inputs: dict[str, torch.Tensor], axes: dict[str, int], wide: bool
    ) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def reference(self, inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
        """The upstream reference in its own precision, as float64."""
        return {name: value.to(torch.float64) for name, value in self._results(inputs, axes, False).items()}

    def independent_reference(
        self, inputs: dict[str, torch.Tensor], axes: dict[str, int]
    ) -> dict[str, torch.Tensor]:
        """The upstream reference on float64 copies of the floating inputs: the second formulation
        the self-check holds the baseline to (code that fixes its own dtypes stays as it is)."""
        return {name: value.to(torch.float64) for name, value in self._results(inputs, axes, True).items()}

    def baseline(self, *tensors: torch.Tensor, **scalars: int) -> None:
        """The reference's results copied into the outputs (destination-passing style)."""
        count = len(self.problem.inputs)
        inputs = {
            spec.name: tensor for spec, tensor in zip(self.problem.inputs, tensors[:count], strict=False)
        }
        outputs = dict(zip((spec.name for spec in self.problem.outputs), tensors[count:], strict=False))
        for name, value in self._into(inputs, outputs, scalars).items():
            if not same_memory(value, outputs[name]):
                outputs[name].copy_(value.reshape(outputs[name].shape))

    def _into(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor],
              scalars: dict[str, int]) -> dict[str, torch.Tensor]:
        """The results of one baseline call (the format decides how ``outputs`` take part)."""
        raise NotImplementedError


def adapter_for(reference_file: str | Path) -> Adapter:
    """The adapter an imported problem's ``reference.py`` builds (its format from adapter.json)."""
    folder = Path(reference_file).resolve().parent
    fmt = json.loads((folder / ADAPTER_FILE).read_text())["format"]
    if fmt == "sol-execbench":
        from evaluator.importers.sxb_adapter import SolExecBenchAdapter

        return SolExecBenchAdapter(reference_file)
    if fmt == "reference-kernels":
        from evaluator.importers.rk_adapter import ReferenceKernelsAdapter

        return ReferenceKernelsAdapter(reference_file)
    raise ValueError(f"{folder}: unknown import format {fmt!r}")
