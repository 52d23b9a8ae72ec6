"""Loading a submission inside the child: a Python file, or PTX/CUDA through ``evaluator.ptx``.

Every failure here is the submission's (COMPILE_ERROR), except a missing toolchain, which is the
runner's: that too is reported as COMPILE_ERROR, with a message that says so.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The name the submission's module gets in sys.modules (never "evaluator.*").
MODULE_NAME = "solboard_submission"
#: Lines of traceback kept in a COMPILE_ERROR message.
TRACEBACK_LINES = 12


class SubmissionError(Exception):
    """The submission cannot be loaded; ``message`` is shown to its author."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class LoadedSubmission:
    language: str
    kernel_for: Callable[[dict[str, int]], Callable[..., Any]]
    evidence: dict[str, Any] | None = None


def short_traceback(error: BaseException, limit: int = TRACEBACK_LINES) -> str:
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-limit:])


def load_python(path: Path, problem: Any = None) -> LoadedSubmission:
    if _imported(problem):
        foreign = _load_foreign(path, problem)
        if foreign is not None:
            return foreign
    # An explicit source loader: the upload's file name (and suffix) must not matter.
    loader = importlib.machinery.SourceFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_loader(MODULE_NAME, loader, origin=str(path))
    if spec is None or spec.loader is None:
        raise SubmissionError(f"cannot load {path.name} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        raise SubmissionError(f"syntax error: {detail}") from None
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        if isinstance(error, ModuleNotFoundError) and error.name == "task" and not _imported(problem):
            hint = _gpu_mode_hint(problem)
            raise SubmissionError(f"import failed: no module named 'task': {hint}") from None
        raise SubmissionError(f"import failed: {short_traceback(error)}") from None
    kernel = getattr(module, "kernel", None)
    if not callable(kernel) and not _imported(problem) and callable(getattr(module, "custom_kernel", None)):
        raise SubmissionError(f"the file defines `custom_kernel` but no `kernel`: {_gpu_mode_hint(problem)}")
    if not callable(kernel) and _imported(problem) and callable(getattr(module, "custom_kernel", None)):
        from evaluator.importers.foreign import custom_kernel_adapter

        kernel = custom_kernel_adapter(module.custom_kernel, problem)
    if not callable(kernel):
        if _imported(problem):
            from evaluator.importers.foreign import contract_text

            raise SubmissionError(f"the file defines no callable kernel: {contract_text(problem)}")
        raise SubmissionError("the file defines no callable `kernel(*inputs, *outputs)`")
    return LoadedSubmission("python", lambda axes: kernel)


def _gpu_mode_hint(problem: Any) -> str:
    """What a GPU MODE submission.py (``from task import ...``, ``custom_kernel(data)``) is told on a
    native problem, where it used to end as a bare traceback."""
    if problem is None:
        native = "define `kernel(*inputs, *outputs)`, which writes the outputs in place"
    else:
        from evaluator.importers.foreign import contract_text

        native = contract_text(problem)
    name = f"{problem.name} is" if problem is not None else "this problem is"
    return ("GPU MODE's `task` module and `custom_kernel(data)` are taken as they are only by problems "
            f"imported from reference-kernels (docs/importing.md); {name} SOLboard's own: {native} "
            "(docs/problems.md)")


def _imported(problem: Any) -> bool:
    """A problem imported from another benchmark, whose own submission formats are accepted too."""
    return bool(getattr(problem, "imported", None))


def _load_foreign(path: Path, problem: Any) -> LoadedSubmission | None:
    """A SOL-ExecBench solution.json (None when the file is Python); GPU MODE's ``task`` module made
    importable for what follows (evaluator/importers/foreign.py)."""
    from evaluator.importers.foreign import ForeignError, install_task_module, read_solution, solution_kernel

    try:
        solution = read_solution(path)
        if solution is None:
            install_task_module(problem)
            return None
        kernel = solution_kernel(solution, problem)
    except ForeignError as error:
        raise SubmissionError(str(error)) from None
    except Exception as error:  # the solution's own code fails to load
        raise SubmissionError(f"import failed: {short_traceback(error)}") from None
    return LoadedSubmission("python", lambda axes: kernel)


def load_native(
    language: str, source: str, launch_spec: str | None, problem: Any, device: str
) -> LoadedSubmission:
    """PTX or CUDA C++ through the PTX engineer's loader; absent loader -> not available here."""
    try:
        loader = importlib.import_module("evaluator.ptx.loader")
    except ImportError:
        raise SubmissionError(f"language {language} not available on this runner") from None
    load_native_kernel = getattr(loader, "load_native_kernel", None)
    if load_native_kernel is None:
        raise SubmissionError(f"language {language} not available on this runner")
    try:
        native = load_native_kernel(language, source, launch_spec, problem, device)
    except Exception as error:  # the loader's errors carry the user-facing message
        message = getattr(error, "message", None) or short_traceback(error)
        raise SubmissionError(f"{language} submission does not build: {message}") from None
    evidence = getattr(native, "evidence", None)
    if evidence is not None and hasattr(evidence, "model_dump"):
        evidence = evidence.model_dump(mode="json")
    return LoadedSubmission(language, native.for_shape, evidence if isinstance(evidence, dict) else None)


def load(
    language: str, path: Path, launch_spec_path: Path | None, problem: Any, device: str
) -> LoadedSubmission:
    if language not in problem.languages:
        raise SubmissionError(f"{problem.name} does not accept {language} submissions")
    if language == "python":
        return load_python(path, problem)
    try:
        source = path.read_text()
        launch_spec = launch_spec_path.read_text() if launch_spec_path else None
    except (OSError, UnicodeDecodeError) as error:
        raise SubmissionError(f"cannot read the source: {error}") from None
    return load_native(language, source, launch_spec, problem, device)
