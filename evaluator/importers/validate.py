"""Validation of a converted problem before it is written: the checks a native problem passes.

1. The catalogue's own loader reads the folder (``load_problem``: names, dtypes, shapes, tolerance).
2. ``counts.py`` answers at every shape (zero when counts are missing, positive when given).
3. On every CPU shape and distribution: the inputs have the declared names, order, shapes and
   dtypes, are contiguous, are the same for the same seed and change with it; the reference
   returns every output at its declared shape; and the self-check
   (``evaluator.problems.selfcheck.check_shape``) passes: the baseline meets the tolerance.
4. Every other shape runs ``generate_inputs`` and ``reference`` under torch's fake tensors (shapes
   and dtypes without memory): the declared shapes hold at the GPU sizes too.

Any failure raises ``Refused`` naming the shape and what was wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from evaluator.importers.common import CPU_SHAPE_MAX_BYTES, Refused, declared_bytes
from evaluator.problems import CatalogueError, Counts, Problem, Shape, load_problem


def _check_inputs(problem: Problem, shape: Shape, inputs: Any, where: str) -> None:
    if not isinstance(inputs, dict) or list(inputs) != [spec.name for spec in problem.inputs]:
        got = list(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise Refused(f"{where}: generate_inputs gave {got}, not the inputs {[s.name for s in problem.inputs]}")
    for spec in problem.inputs:
        tensor = inputs[spec.name]
        expected = spec.concrete_shape(shape.axes)
        if not isinstance(tensor, torch.Tensor):
            raise Refused(f"{where}: input {spec.name} is a {type(tensor).__name__}")
        if tuple(tensor.shape) != expected or str(tensor.dtype) != f"torch.{spec.dtype}":
            raise Refused(f"{where}: input {spec.name} is {tuple(tensor.shape)} {tensor.dtype}, declared {expected} "
                          f"{spec.dtype}")
        if not tensor.is_contiguous():
            raise Refused(f"{where}: input {spec.name} is not contiguous")


def _check_reference(problem: Problem, shape: Shape, outputs: Any, where: str) -> None:
    names = [spec.name for spec in problem.outputs]
    if not isinstance(outputs, dict) or sorted(outputs) != sorted(names):
        got = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
        raise Refused(f"{where}: the reference returned {got}, not the outputs {names}")
    for spec in problem.outputs:
        expected = spec.concrete_shape(shape.axes)
        if tuple(outputs[spec.name].shape) != expected:
            raise Refused(f"{where}: the reference's {spec.name} is {tuple(outputs[spec.name].shape)}, declared "
                          f"{expected}")


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[name].reshape(-1).view(torch.uint8), b[name].reshape(-1).view(torch.uint8)) for name in a)


def _declared_bytes(problem: Problem, shape: Shape) -> int:
    specs = [{"shape": spec.shape, "dtype": spec.dtype} for spec in problem.inputs + problem.outputs]
    return declared_bytes(specs, dict(shape.axes))


def _fake_limit(error: BaseException) -> bool:
    module = type(error).__module__
    return module.startswith(("torch._subclasses", "torch.fx", "torch._guards")) or "FakeTensor" in str(error)


def validate(folder: Path) -> list[str]:
    """Check the problem in ``folder``; returns notes, raises ``Refused`` when it does not hold."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from evaluator.problems.selfcheck import check_shape

    try:
        problem = load_problem(folder)
    except (CatalogueError, KeyError, TypeError, ValueError) as error:
        raise Refused(f"the catalogue's loader refuses it: {error}") from error
    provided = problem.imported.get("counts") == "provided"
    for shape in problem.shapes:
        try:
            counts = problem.counts(shape.axes)
        except Exception as error:
            raise Refused(f"counts.py fails at {shape.shape_id}: {type(error).__name__}: {error}") from error
        if not isinstance(counts, Counts) or counts.bytes < 0:
            raise Refused(f"counts.py gives no Counts at {shape.shape_id}")
        if provided and not (counts.bytes > 0 and counts.total_flops >= 0):
            raise Refused(f"the given counts.py gives no bytes at {shape.shape_id}")
    cpu = problem.select_shapes("all", device="cpu")
    if not cpu:
        raise Refused("no shape is flagged cpu")
    try:
        module = problem.reference_module()
        adapter = getattr(module, "_adapter", None)
        if adapter is not None:
            adapter.upstream  # noqa: B018 - loads the upstream code now, to report its import errors as such
    except Exception as error:
        raise Refused(f"the reference does not load here: {type(error).__name__}: {error}") from error

    for shape in cpu:
        for distribution in problem.distributions:
            where = f"shape {shape.shape_id} ({distribution})"
            first = module.generate_inputs(dict(shape.axes), 1, "cpu", distribution)
            _check_inputs(problem, shape, first, where)
            if not _same(first, module.generate_inputs(dict(shape.axes), 1, "cpu", distribution)):
                raise Refused(f"{where}: the inputs differ between two draws with the same seed (an input "
                              "left uninitialized, such as a torch.empty buffer the reference never fills?)")
            if _same(first, module.generate_inputs(dict(shape.axes), 2, "cpu", distribution)):
                raise Refused(f"{where}: the inputs do not change with the seed")
            _check_reference(problem, shape, module.reference(first, dict(shape.axes)), where)
        for row in check_shape(problem, shape, 1, "cpu", None, None):
            for name, result in row["outputs"].items():
                if not result["passed"]:
                    raise Refused(
                        f"self-check: at {shape.shape_id} ({row['distribution']}) the baseline's {name} matches "
                        f"{result['matched']:.6f} of the reference (needs {problem.tolerance_for(name).matched_ratio})"
                    )

    unchecked: list[str] = []
    others = [shape for shape in problem.shapes if not shape.cpu]
    for shape in others:
        where = f"shape {shape.shape_id}"

        def check(shape: Shape = shape, where: str = where) -> None:
            inputs = module.generate_inputs(dict(shape.axes), 1, "cpu", problem.distributions[0])
            _check_inputs(problem, shape, inputs, where)
            _check_reference(problem, shape, module.reference(inputs, dict(shape.axes)), where)

        try:
            with FakeTensorMode():
                check()
        except Refused:
            raise
        except Exception as error:  # a fake-tensor limit (run small shapes for real), or refused below
            if not _fake_limit(error):
                raise Refused(f"{where}: {type(error).__name__}: {error}") from error
            if _declared_bytes(problem, shape) > CPU_SHAPE_MAX_BYTES:
                unchecked.append(shape.shape_id)
                continue
            try:
                check()
            except Refused:
                raise
            except Exception as again:
                raise Refused(f"{where}: {type(again).__name__}: {again}") from again
    checked = len(others) - len(unchecked)
    cpu_ids = ", ".join(s.shape_id for s in cpu)
    notes = [f"validated: CPU self-check at {cpu_ids}; {checked} other shape(s) checked (fake tensors, or the CPU)"]
    if unchecked:
        notes.append(f"not checked (data-dependent under fake tensors, too big for the CPU): {', '.join(unchecked)}")
    return notes
