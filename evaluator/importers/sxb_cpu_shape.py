"""A CPU shape for a SOL-ExecBench problem whose every workload is too big for the CPU.

Dataset workloads fix realistic sizes (thousands of tokens over a model's hidden size), so the
smallest often moves more than the CPU check's limit. The variable axes (batch, sequence, tokens)
are brought down one at a time, each to the smallest of a few powers of two that still satisfies
the definition's constraints and expressions, until the shape fits; when a model's constant sizes
alone are too big, those come down too, where the reference accepts them. The result is kept only
when the reference (and the custom inputs entrypoint) runs on it under fake tensors. It is an
extra, unranked shape for the CPU check and the CPU development device, never a workload that
ranks, and the report says which sizes it changed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluator.importers.common import CPU_FLOPS_MAX, CPU_SHAPE_MAX_BYTES, declared_bytes
from evaluator.importers.sxb_definition import resolve

SMALL_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: At most this many fake runs look for a smaller shape.
MAX_TRIALS = 40


def small_shape(definition: dict[str, Any], const: dict[str, int], var: list[str], expr: dict[str, str],
                shapes: list[dict[str, Any]], axes: list[str], tensors: list[dict[str, Any]],
                cost: Callable[[dict[str, int]], float | None]) -> dict[str, int] | None:
    """The smaller axes found, or None. The variable axes come down first; when the constant axes
    alone keep the shape too big (a model's hidden size and expert count), they come down too.
    ``cost`` is the reference's flops at some axes under fake tensors (None where it refuses them):
    a step is kept only where it makes the shape cheaper and the reference takes it."""
    constraints = [str(item) for item in definition.get("constraints") or []]
    current = min(
        ({axis: shape[axis] for axis in axes} for shape in shapes), key=lambda v: declared_bytes(tensors, v)
    )
    scalars = {axis: current[axis] for axis in axes if axis not in definition["axes"]}
    fixed, trials = dict(const), [0]

    def weight(values: dict[str, int]) -> tuple[int, float] | None:
        if trials[0] >= MAX_TRIALS:
            return None
        trials[0] += 1
        flops = cost(values)
        return None if flops is None else (declared_bytes(tensors, values), flops)

    now = weight(current)
    if now is None:
        return None
    for axis in sorted(var, key=lambda name: -current[name]) + sorted(const, key=lambda name: -const[name]):
        if _fits(now):
            break
        for value in (item for item in SMALL_VALUES if item < current[axis]):
            trial_var = {name: current[name] for name in var} | ({axis: value} if axis in var else {})
            trial_const = fixed | ({axis: value} if axis in const else {})
            try:
                candidate = {
                    **resolve({"axes": trial_var}, trial_const, var, expr, constraints, set()),
                    **scalars,
                }
            except ValueError:
                continue
            found = weight(candidate)
            if found is not None and found < now:
                current, fixed, now = candidate, trial_const, found
                break
    return current if _fits(now) else None


def _fits(weight: tuple[int, float]) -> bool:
    return weight[0] <= CPU_SHAPE_MAX_BYTES and weight[1] <= CPU_FLOPS_MAX


def fake_cost(workdir: Path, upstream: str, adapter: dict[str, Any], inputs: list[dict[str, Any]],
              axes: dict[str, int], outputs: list[dict[str, Any]] | None = None) -> float | None:
    """The flops of the custom inputs entrypoint and ``run`` at these axes under fake tensors, or
    None where they refuse them or make tensors of other sizes than declared (an entrypoint or a
    reference that fixes a size the axes say otherwise)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from evaluator.importers.common import dim_size
    from evaluator.importers.derived_counts import count_flops
    from evaluator.importers.runtime import load_upstream, on_device

    module, family = load_upstream(workdir, upstream)
    declared = {spec["name"]: spec for spec in inputs}
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), on_device(family, "cpu", 1), torch.no_grad():
            scalars = {p["name"]: (p["value"] if p["kind"] == "fixed" else axes[p["axis"]])
                       for p in adapter["parameters"] if p["kind"] != "tensor"}
            custom = {}
            if adapter.get("custom_entrypoint"):
                custom = dict(
                    getattr(module, adapter["custom_entrypoint"])({**axes, **scalars}, torch.device("cpu"))
                )
            args = []
            for parameter in adapter["parameters"]:
                name = parameter["name"]
                if parameter["kind"] != "tensor":
                    args.append(scalars[name])
                elif parameter["source"] == "custom":
                    if tuple(custom[name].shape) != tuple(
                        dim_size(dim, axes) for dim in declared[name]["shape"]
                    ):
                        return None
                    args.append(custom[name])
                else:
                    spec = declared[name]
                    args.append(torch.zeros([dim_size(dim, axes) for dim in spec["shape"]],
                                            dtype=getattr(torch, spec["dtype"])))
            result: list[Any] = []
            flops, _ = count_flops(lambda: result.append(module.run(*args)))
    except Exception:  # the reference refuses these sizes (or needs real values)
        return None
    if outputs is not None and not _outputs_as_declared(result[0], outputs, axes):
        return None
    return sum(flops.values())


def _outputs_as_declared(result: Any, outputs: list[dict[str, Any]], axes: dict[str, int]) -> bool:
    from evaluator.importers.common import dim_size

    if isinstance(result, dict):
        values = [result.get(spec["name"]) for spec in outputs]
    else:
        values = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(values) != len(outputs):
        return False
    for value, spec in zip(values, outputs, strict=False):
        shape = tuple(getattr(value, "shape", ()))
        if shape != tuple(dim_size(dim, axes) for dim in spec["shape"]):
            return False
    return True
