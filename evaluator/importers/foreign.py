"""Submissions written for the benchmark a problem was imported from, accepted as they are.

- GPU MODE (problems imported from reference-kernels): a ``submission.py`` that does
  ``from task import input_t, output_t`` and defines ``custom_kernel(data) -> output``. The
  problem's own ``task.py`` is importable as ``task`` while the file loads, and SOLboard's call
  ``kernel(*inputs, *outputs)`` becomes ``custom_kernel(data)`` with the task's data structure
  (the output buffers in it where the task has them); whatever it returns is copied into the
  outputs unless it returned the buffers themselves.
- SOL-ExecBench (problems imported from it): a ``solution.json`` (``spec.entry_point``
  ``"file.py::function"``, ``sources``, ``destination_passing_style``) whose sources are Python
  (pytorch, triton, cute_dsl, cutile). The sources are written to a private folder and the entry
  point is called with the definition's inputs in order (fixed scalars included), its result
  copied into the outputs, or with the outputs after the inputs in destination-passing style.
  A ``solution.json`` in CUDA C++ (``cuda``, ``cpp``) is a native kernel: where it maps onto the
  problem's native ABI (one ``.cu`` file with a SOLboard launch spec, no PyTorch extension code)
  the site takes it as a CUDA submission (``native_solution``), else it refuses it with the reason.

This runs inside the sandboxed child, like the submission itself: nothing here is trusted more
than the code it loads.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

#: SOL-ExecBench languages whose entry point is a Python function.
PYTHON_LANGUAGES = {"pytorch", "python", "triton", "cute_dsl", "cutile", "tilelang", "cupy"}
#: SOL-ExecBench languages compiled as native code (its CUDA and CUTLASS solutions).
NATIVE_SOLUTION_LANGUAGES = {"cuda", "cpp", "cuda_cpp", "c++", "cutlass"}
#: What a PyTorch C++/CUDA extension (SOL-ExecBench's ``binding: torch``) contains and a SOLboard
#: native kernel cannot: host code that allocates tensors and launches kernels, Python bindings.
TORCH_EXTENSION_MARKS = (
    "torch/extension.h",
    "<torch/",
    "<ATen/",
    "<c10/",
    "PYBIND11_MODULE",
    "TORCH_LIBRARY",
)
#: A source of a native solution.json that holds its launch spec (else the .cu file's comment block).
LAUNCH_SPEC_FILES = ("launch_spec.toml", "launch.toml")


class ForeignError(Exception):
    """The submission does not fit the contract it claims; the message explains that contract."""


def imported_format(problem: Any) -> str | None:
    imported = getattr(problem, "imported", None) or {}
    return imported.get("format")


# ---------------------------------------------------------------- GPU MODE


def install_task_module(problem: Any) -> None:
    """``task`` (the problem's upstream task.py) importable while a GPU MODE submission loads."""
    if imported_format(problem) != "reference-kernels" or "task" in sys.modules:
        return
    spec = json.loads((problem.folder / "adapter.json").read_text())
    path = problem.folder / spec["task"] if spec.get("task") else None
    if path is not None and path.is_file():
        loaded = importlib.util.spec_from_file_location("task", path)
        if loaded is not None and loaded.loader is not None:
            module = importlib.util.module_from_spec(loaded)
            sys.modules["task"] = module
            loaded.loader.exec_module(module)
            return
    module = ModuleType("task", "The task's type names (its task.py was not part of the import).")
    module.input_t = module.output_t = typing.Any  # type: ignore[attr-defined]
    sys.modules["task"] = module


def contract_text(problem: Any) -> str:
    inputs = ", ".join(spec.name for spec in problem.inputs)
    outputs = ", ".join(spec.name for spec in problem.outputs)
    text = f"define `kernel({inputs}, {outputs})`, which writes the outputs in place"
    fmt = imported_format(problem)
    if fmt == "reference-kernels":
        text += (", or GPU MODE's `custom_kernel(data)` (with `from task import input_t, output_t`), which "
                 "receives the task's data as generate_input makes it and returns its output")
    elif fmt == "sol-execbench":
        text += ", or submit SOL-ExecBench's solution.json (spec.entry_point and sources)"
    return text


def custom_kernel_adapter(custom_kernel: Any, problem: Any) -> Any:
    """SOLboard's ``kernel(*inputs, *outputs, **scalars)`` calling GPU MODE's ``custom_kernel(data)``."""
    from evaluator.importers.rk_adapter import ReferenceKernelsAdapter
    from evaluator.importers.runtime import same_memory

    adapter = ReferenceKernelsAdapter(problem.folder / "reference.py")
    count = len(problem.inputs)
    input_names = [spec.name for spec in problem.inputs]
    output_names = [spec.name for spec in problem.outputs]

    def kernel(*tensors: Any, **scalars: int) -> None:
        inputs = dict(zip(input_names, tensors[:count], strict=False))
        outputs = dict(zip(output_names, tensors[count:], strict=False))
        data = adapter.data(inputs, outputs, adapter.axes_of_call(inputs, outputs, scalars))
        result = custom_kernel(data)
        try:
            named = adapter.results(result, outputs, tensors[0] if tensors else None)
        except ValueError as error:
            raise ForeignError(
                f"custom_kernel(data) must return the task's output_t ({', '.join(output_names)}): {error}"
            ) from None
        for name, value in named.items():
            if not same_memory(value, outputs[name]):
                outputs[name].copy_(value.reshape(outputs[name].shape))

    return kernel


# ---------------------------------------------------------------- SOL-ExecBench


def read_solution(path: Path) -> dict[str, Any] | None:
    """The solution.json in ``path``, or None when the file is not one (a Python submission)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return parse_solution(text)


def parse_solution(text: str) -> dict[str, Any] | None:
    """A SOL-ExecBench solution.json's content, or None when the text is not one."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        solution = json.loads(text)
    except ValueError:
        return None
    if (
        isinstance(solution, dict)
        and isinstance(solution.get("spec"), dict)
        and isinstance(solution.get("sources"), list)
    ):
        return solution
    return None


def solution_languages(solution: dict[str, Any]) -> set[str]:
    spec = solution["spec"]
    return {str(item).lower() for item in spec.get("languages") or [spec.get("language", "")]}


def _check_definition(solution: dict[str, Any], problem: Any) -> None:
    upstream = (getattr(problem, "imported", None) or {}).get("upstream_name")
    if solution.get("definition") and upstream and solution["definition"] != upstream:
        raise ForeignError(f"this solution is for definition {solution['definition']!r}, not {upstream!r}")


def _entry(solution: dict[str, Any], problem: Any) -> tuple[str, str]:
    spec = solution["spec"]
    languages = solution_languages(solution)
    if not languages & PYTHON_LANGUAGES:
        raise ForeignError(
            f"a solution.json in {', '.join(sorted(languages))} is a native kernel: the site takes it as "
            "a CUDA submission where it maps onto the problem's native ABI (docs/importing.md), and a "
            "runner never builds a PyTorch extension"
        )
    _check_definition(solution, problem)
    file_name, _, function = str(spec.get("entry_point", "")).partition("::")
    if not file_name.endswith(".py") or not function:
        raise ForeignError(f"spec.entry_point {spec.get('entry_point')!r} is not 'file.py::function'")
    return file_name, function


def _write_sources(solution: dict[str, Any]) -> Path:
    home = Path(tempfile.mkdtemp(prefix="solboard-solution-"))
    for source in solution["sources"]:
        relative = PurePosixPath(str(source.get("path", "")))
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ForeignError(
                f"source path {source.get('path')!r} must be a relative path inside the solution"
            )
        target = home.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(source.get("content", "")))
    return home


def solution_kernel(solution: dict[str, Any], problem: Any) -> Any:
    """SOLboard's kernel calling the solution's entry point (see the module docstring)."""
    from evaluator.importers.runtime import same_memory
    from evaluator.importers.sxb_adapter import SolExecBenchAdapter

    file_name, function = _entry(solution, problem)
    home = _write_sources(solution)
    sys.path.insert(0, str(home))
    loaded = importlib.util.spec_from_file_location(Path(file_name).stem, home / file_name)
    if loaded is None or loaded.loader is None or not (home / file_name).is_file():
        raise ForeignError(f"spec.entry_point names {file_name}, which is not among the sources")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[loaded.name] = module
    loaded.loader.exec_module(module)
    entry = getattr(module, function, None)
    if not callable(entry):
        raise ForeignError(f"{file_name} defines no callable {function}")
    adapter = SolExecBenchAdapter(problem.folder / "reference.py")
    dps = bool(solution["spec"].get("destination_passing_style"))
    count = len(problem.inputs)
    input_names = [spec.name for spec in problem.inputs]
    output_names = [spec.name for spec in problem.outputs]

    def kernel(*tensors: Any, **scalars: int) -> None:
        args = adapter.call_args(dict(zip(input_names, tensors[:count], strict=False)), scalars)
        outputs = dict(zip(output_names, tensors[count:], strict=False))
        if dps:
            entry(*args, *outputs.values())
            return
        for name, value in adapter.named(entry(*args), tensors[0] if tensors else None).items():
            if not same_memory(value, outputs[name]):
                outputs[name].copy_(value.reshape(outputs[name].shape))

    return kernel


# ---------------------------------------------------------------- SOL-ExecBench, native


@dataclass(frozen=True)
class NativeSolution:
    """A CUDA solution.json as the CUDA submission it maps onto."""

    source: str  # the .cu file
    launch_spec: str | None  # a launch_spec.toml of the solution; None: the .cu's comment block
    path: str  # the .cu file's path in the solution
    language: str = "cuda"


def native_solution(solution: dict[str, Any], problem: Any) -> NativeSolution | None:
    """The CUDA submission a native solution.json maps onto; None for a Python one (the sandboxed
    child runs those); ForeignError with the reason where it does not map."""
    languages = solution_languages(solution)
    if languages & PYTHON_LANGUAGES or not languages & NATIVE_SOLUTION_LANGUAGES:
        return None
    _check_definition(solution, problem)
    shown = ", ".join(sorted(languages))
    if "cuda" not in problem.languages:
        from evaluator.ptx.native_abi import describe, from_problem

        raise ForeignError(f"a {shown} solution.json is a native kernel, and {problem.name} takes none: "
                           f"{describe(from_problem(problem)).reason}")
    files = {str(item.get("path", "")): str(item.get("content", "")) for item in solution["sources"]}
    kernels = [path for path in files if path.endswith(".cu")]
    if len(kernels) != 1:
        raise ForeignError(
            f"a {shown} solution.json maps onto one CUDA C++ file (a .cu source), this one has "
            f"{len(kernels)}{': ' + ', '.join(kernels) if kernels else ''}; {_abi_hint(problem)}"
        )
    text = files[kernels[0]]
    marks = [mark for mark in TORCH_EXTENSION_MARKS if mark in text]
    if marks:
        raise ForeignError(
            f"{kernels[0]} is a PyTorch extension ({', '.join(marks)}: host code that allocates and "
            "launches, Python bindings), which SOLboard does not build: a native submission is the "
            f"kernel alone, launched by the harness from a launch spec; {_abi_hint(problem)}"
        )
    spec = next((files[name] for name in LAUNCH_SPEC_FILES if name in files), None)
    if spec is None and "solboard-launch:" not in text:
        raise ForeignError(f"{kernels[0]} has no launch spec (a `// solboard-launch:` comment block, or a "
                           f"launch_spec.toml source); {_abi_hint(problem)}")
    return NativeSolution(source=text, launch_spec=spec, path=kernels[0])


def _abi_hint(problem: Any) -> str:
    """What a kernel of this problem receives, in the harness's order (docs/ptx.md, section 3)."""
    from evaluator.ptx.native_abi import describe, from_problem

    abi = describe(from_problem(problem))
    parameters = ", ".join(f"{param.c_type} {param.name}" for param in abi.parameters)
    return (
        f'write the kernel as `extern "C" __global__` with the parameters ({parameters}) and a launch spec '
        f"(`solboard problem {problem.name} --launch-spec` prints one to start from)"
    )
