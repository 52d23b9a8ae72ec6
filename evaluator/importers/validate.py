"""Validation of a converted problem before it is written: the checks a native problem passes,
and the counts derived on the way (docs/importing.md, "Validation").

1. The catalogue's own loader reads the folder (``load_problem``: names, dtypes, shapes, tolerance).
2. Every shape runs ``generate_inputs`` and ``reference`` under torch's fake tensors (shapes and
   dtypes without memory): the declared shapes hold at the GPU sizes too, and, when the problem
   has no counts, its flops are counted there (``derived_counts``). A shape whose code needs real
   values runs for real when it is small enough for the CPU, and is noted as not checked otherwise.
3. On every CPU shape and distribution: the inputs have the declared names, order, shapes and
   dtypes, are contiguous, are the same for the same seed and change with it; the reference
   returns every output at its declared shape; the self-check (``selfcheck.check_shape``) passes;
   and, because the baseline IS the reference, the baseline also meets the tolerance against the
   reference's independent float64 formulation (``independent.py``), or, where the reference's own
   rounding misses the tolerance, the shortfall the import widens the tolerance by.
4. ``counts.py`` answers at every shape (zero when counts are missing, positive bytes when given
   or derived).

Any failure raises ``Refused`` naming the shape and what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evaluator.importers.common import CPU_SHAPE_MAX_BYTES, Refused, declared_bytes
from evaluator.importers.derived_counts import compulsory_bytes, count_flops
from evaluator.importers.rk_probe import fake_limit
from evaluator.problems import CatalogueError, Counts, Problem, Shape, load_problem


@dataclass
class Validation:
    notes: list[str] = field(default_factory=list)
    #: Derived counts by shape id ({"flops": {...}, "bytes": ...}), when asked for.
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Shapes without derived counts, and why.
    underived: dict[str, str] = field(default_factory=dict)
    #: Shapes whose reference ran attention with an explicit mask (counted in full).
    masked_attention: list[str] = field(default_factory=list)
    #: Where the baseline missed the tolerance against the float64 formulation (the worst miss):
    #: the import widens the tolerance by it (``independent.widening``) or refuses.
    shortfall: Any = None


def load(folder: Path) -> Problem:
    try:
        return load_problem(folder)
    except (CatalogueError, KeyError, TypeError, ValueError) as error:
        raise Refused(f"the catalogue's loader refuses it: {error}") from error


def reference_module(problem: Problem) -> Any:
    try:
        module = problem.reference_module()
        adapter = getattr(module, "_adapter", None)
        if adapter is not None:
            adapter.upstream  # noqa: B018 - loads the upstream code now, to report its import errors as such
    except Exception as error:
        raise Refused(f"the reference does not load here: {type(error).__name__}: {error}") from error
    return module


def check_inputs(problem: Problem, shape: Shape, inputs: Any, where: str) -> None:
    if not isinstance(inputs, dict) or list(inputs) != [spec.name for spec in problem.inputs]:
        got = list(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise Refused(
            f"{where}: generate_inputs gave {got}, not the inputs {[s.name for s in problem.inputs]}"
        )
    for spec in problem.inputs:
        tensor = inputs[spec.name]
        expected = spec.concrete_shape(shape.axes)
        if not isinstance(tensor, torch.Tensor):
            raise Refused(f"{where}: input {spec.name} is a {type(tensor).__name__}")
        if tuple(tensor.shape) != expected or str(tensor.dtype) != f"torch.{spec.dtype}":
            raise Refused(
                f"{where}: input {spec.name} is {tuple(tensor.shape)} {tensor.dtype}, declared {expected} "
                f"{spec.dtype}"
            )
        if not tensor.is_contiguous():
            raise Refused(f"{where}: input {spec.name} is not contiguous")


def check_reference(problem: Problem, shape: Shape, outputs: Any, where: str) -> None:
    names = [spec.name for spec in problem.outputs]
    if not isinstance(outputs, dict) or sorted(outputs) != sorted(names):
        got = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
        raise Refused(f"{where}: the reference returned {got}, not the outputs {names}")
    for spec in problem.outputs:
        expected = spec.concrete_shape(shape.axes)
        if tuple(outputs[spec.name].shape) != expected:
            raise Refused(
                f"{where}: the reference's {spec.name} is {tuple(outputs[spec.name].shape)}, declared "
                f"{expected}"
            )


def _declared_bytes(problem: Problem, shape: Shape) -> int:
    specs = [{"shape": spec.shape, "dtype": spec.dtype} for spec in problem.inputs + problem.outputs]
    return declared_bytes(specs, dict(shape.axes))


# ---------------------------------------------------------------- every shape: declared shapes and counts


def _run_shape(problem: Problem, module: Any, shape: Shape, result: Validation, derive: bool) -> None:
    """generate_inputs and reference at one shape, declared shapes checked, flops counted."""
    where = f"shape {shape.shape_id}"
    inputs = module.generate_inputs(dict(shape.axes), 1, "cpu", problem.distributions[0])
    check_inputs(problem, shape, inputs, where)
    outputs: dict[str, Any] = {}

    def call() -> None:
        outputs.update(module.reference(inputs, dict(shape.axes)))

    flops, masked = count_flops(call)
    check_reference(problem, shape, outputs, where)
    if derive:
        result.derived[shape.shape_id] = {
            "flops": flops,
            "bytes": compulsory_bytes(problem, dict(shape.axes)),
        }
        if masked:
            result.masked_attention.append(shape.shape_id)


#: Shapes beyond the CPU ones that run for real when fake tensors cannot follow the reference (its
#: work depends on values): the smallest few, so a reference that loops over its data costs seconds,
#: not minutes, and which shapes get counts depends on the shapes alone.
REAL_FALLBACKS = 2


def every_shape(problem: Problem, module: Any, result: Validation, derive: bool) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    unchecked: list[str] = []
    order = sorted(problem.shapes, key=lambda item: (not item.cpu, _declared_bytes(problem, item)))
    allowed = {shape.shape_id for shape in order[: REAL_FALLBACKS + sum(shape.cpu for shape in order)]}
    # A problem that needs a GPU runs nothing for real here: when fake tensors cannot follow its
    # smallest shape, the same code will not be followed at the others, whose generators can take
    # minutes under fake tensors (a MoE's per-token routing), so they are not tried.
    gpu_only = bool(problem.imported.get("gpu_only"))
    for shape in order if gpu_only else problem.shapes:
        where = f"shape {shape.shape_id}"
        if gpu_only and unchecked and len(unchecked) == len(order[: order.index(shape)]):
            unchecked.append(shape.shape_id)
            result.underived[shape.shape_id] = ("not tried: fake tensors cannot follow the reference at the "
                                                "smallest shape and no shape runs on the CPU")
            continue
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                _run_shape(problem, module, shape, result, derive)
            continue
        except Refused:
            raise
        except Exception as error:  # a fake-tensor limit (run small shapes for real), or refused below
            if not fake_limit(error):
                raise Refused(f"{where}: {type(error).__name__}: {error}{_hardware_hint(error)}") from error
        if _declared_bytes(problem, shape) > CPU_SHAPE_MAX_BYTES or shape.shape_id not in allowed:
            unchecked.append(shape.shape_id)
            result.underived[shape.shape_id] = (
                "its reference's work depends on values (fake tensors cannot follow it) "
                f"and only the CPU shapes and the {REAL_FALLBACKS} smallest others run "
                "for real"
            )
            continue
        try:
            _run_shape(problem, module, shape, result, derive)
        except Refused:
            raise
        except Exception as again:
            raise Refused(f"{where}: {type(again).__name__}: {again}") from again
    checked = len(problem.shapes) - len(unchecked)
    result.notes.append(f"validated: {checked} shape(s) checked under fake tensors or on the CPU")
    if unchecked:
        result.notes.append(
            f"not checked (the reference's work depends on values; not run for real): {', '.join(unchecked)}"
        )


# ---------------------------------------------------------------- CPU shapes, for real


#: Errors of torch ops the CPU cannot run, with the hardware they need.
_GPU_ONLY_OPS = {
    "Invalid scaling configuration": (
        "torch._scaled_mm with block scales (a block-scaled fp4 or fp8 matmul), which runs on GPUs only "
        "(fp4 block scales on Blackwell): a hardware dependency the CPU validation cannot meet"
    ),
}


def _hardware_hint(error: BaseException) -> str:
    """Why an error of the reference at a shape is the CPU's, not the problem's, where known."""
    for text, why in _GPU_ONLY_OPS.items():
        if text in str(error):
            return f" (its reference calls {why})"
    return ""


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(
        torch.equal(a[name].reshape(-1).view(torch.uint8), b[name].reshape(-1).view(torch.uint8))
        for name in a
    )


def cpu_shapes(problem: Problem, module: Any, result: Validation) -> None:
    from evaluator.importers.independent import TighterThanRounding, check_independent
    from evaluator.problems.selfcheck import check_shape

    cpu = problem.select_shapes("all", device="cpu")
    if not cpu:
        raise Refused("no shape is flagged cpu")
    verdicts: list[str] = []
    for shape in cpu:
        for distribution in problem.distributions:
            where = f"shape {shape.shape_id} ({distribution})"
            first = module.generate_inputs(dict(shape.axes), 1, "cpu", distribution)
            check_inputs(problem, shape, first, where)
            if not _same(first, module.generate_inputs(dict(shape.axes), 1, "cpu", distribution)):
                raise Refused(f"{where}: the inputs differ between two draws with the same seed (an input "
                              "left uninitialized, such as a torch.empty buffer the reference never fills?)")
            if _same(first, module.generate_inputs(dict(shape.axes), 2, "cpu", distribution)):
                if problem.imported.get("format") != "sol-execbench":
                    raise Refused(f"{where}: the inputs do not change with the seed")
                # a definition whose entrypoint draws nothing (positions, frequency tables)
                result.notes.append(
                    f"{where}: the inputs do not change with the seed (the source draws none)"
                )
            if shape == cpu[0]:  # float64 on the CPU is slow: the smallest shape tells the tolerance's story
                try:
                    verdicts.append(check_independent(problem, module, shape, distribution, first))
                except TighterThanRounding as short:
                    verdicts.append("widened")
                    found = short.shortfall
                    result.shortfall = found if result.shortfall is None else result.shortfall.merge(found)
        for row in check_shape(problem, shape, 1, "cpu", None, None):
            for name, outcome in row["outputs"].items():
                if not outcome["passed"]:
                    raise Refused(
                        f"self-check: at {shape.shape_id} ({row['distribution']}) the baseline's {name} "
                        f"matches {outcome['matched']:.6f} of the reference "
                        f"(needs {problem.tolerance_for(name).matched_ratio}); the baseline is the "
                        "reference itself, so two runs of it on the same inputs differ: it draws random "
                        "numbers of its own (a dropout, a random mask) or changes its inputs, and SOLboard "
                        "needs a deterministic reference (make the randomness an input)"
                    )
    result.notes.append(
        f"CPU self-check at {', '.join(s.shape_id for s in cpu)}: the baseline meets the tolerance "
        f"against the reference and its float64 formulation ({_independent_text(verdicts)})"
    )


def _independent_text(verdicts: list[str]) -> str:
    if all(item == "identical" for item in verdicts):
        return "equal to it once rounded to the outputs' dtypes"
    if all(item in ("identical", "within") for item in verdicts):
        return "within the tolerance of it"
    if "widened" in verdicts:
        return "within the widened tolerance of it"
    return next(item for item in verdicts if item not in ("identical", "within"))


def check_counts(problem: Problem) -> None:
    mode = problem.imported.get("counts")
    for shape in problem.shapes:
        if mode == "derived" and not shape.ranked:
            continue
        try:
            counts = problem.counts(dict(shape.axes))
        except Exception as error:
            raise Refused(f"counts.py fails at {shape.shape_id}: {type(error).__name__}: {error}") from error
        if not isinstance(counts, Counts) or counts.bytes < 0:
            raise Refused(f"counts.py gives no Counts at {shape.shape_id}")
        if mode in ("provided", "derived") and not (counts.bytes > 0 and counts.total_flops >= 0):
            raise Refused(f"the {mode} counts give no bytes at {shape.shape_id}")


def check_shapes(folder: Path, derive: bool = False) -> Validation:
    """Steps 1 and 2: the loader and every shape under fake tensors (counting flops when ``derive``)."""
    problem = load(folder)
    result = Validation()
    every_shape(problem, reference_module(problem), result, derive)
    return result


def check_cpu(folder: Path, result: Validation) -> None:
    """Step 3, for real on the CPU shapes (after ``check_shapes``, once the CPU shapes are final)."""
    problem = load(folder)
    cpu_shapes(problem, reference_module(problem), result)


def validate(folder: Path, derive: bool = False) -> Validation:
    """Check the problem in ``folder`` (counting flops at every shape when ``derive``); raises
    ``Refused`` when it does not hold."""
    from evaluator.importers.independent import TighterThanRounding

    result = check_shapes(folder, derive)
    check_cpu(folder, result)
    if result.shortfall is not None:  # widening is the import's (worker.py): unwidened, it does not hold
        raise TighterThanRounding(result.shortfall)
    if not derive:
        check_counts(load(folder))
    return result
