"""The ``[ptx]`` table of an imported problem: what a PTX or CUDA C++ kernel of it receives.

Native problems declare the table by hand (docs/ptx.md, section 3); an import derives it from what
the source declares, so that people can bring native kernels to imported problems too (SOL-ExecBench's
CUDA/CUTLASS solutions are native kernels):

- ``tensors``: every input then every output, in the order the harness hands them to a kernel;
- ``scalars``: every axis, the source's integer and boolean scalars (``scalar_args``) among them;
- ``tensormaps``: the tensors TMA can describe on every shape (at most 5 dims, 16-byte row pitches,
  a dtype TMA knows), computed with the same rule ``table_errors`` checks;
- ``constants``: the real numbers a Python kernel never receives but the definition fixes (a
  SOL-ExecBench float scalar such as ``eps``; a float every shape of a GPU MODE task's data holds).

Where the definition does not give a native kernel what it needs, the problem takes Python only
and the import report says why: a GPU MODE task whose data holds a plain value that changes with
the shape and is no axis (a kernel could not receive it). No architecture features are required
(``required_features`` is left out: the source says nothing about wgmma or tcgen05).

It reads the candidate and its adapter description; nothing upstream runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from evaluator.importers.common import Candidate, identifier, unique

NATIVE_LANGUAGES = ["python", "ptx", "cuda"]


@dataclass(frozen=True)
class NativeTable:
    """The table to write (empty when native kernels are not offered), and what the report says."""

    table: dict[str, Any]
    languages: list[str]
    reason: str = ""  # why native kernels are not offered; empty when they are
    notes: list[str] = field(default_factory=list)


def native_table(candidate: Candidate) -> NativeTable:
    """The ``[ptx]`` table of ``candidate`` (whose shapes are final), or why it has none."""
    constants, notes, blocker = _constants(candidate)
    if blocker:
        return NativeTable({}, ["python"], blocker, notes)
    tensors = [spec["name"] for spec in (*candidate.inputs, *candidate.outputs)]
    table: dict[str, Any] = {"tensors": tensors, "scalars": list(candidate.axes),
                             "tensormaps": _tensormaps(candidate)}
    if constants:
        table["constants"] = constants
    return NativeTable(table, list(NATIVE_LANGUAGES), "", notes)


def describe_table(result: NativeTable) -> str:
    """One line for the import report."""
    if result.reason:
        return f"native kernels (ptx, cuda): not offered: {result.reason}"
    table = result.table
    parts = [f"{len(table['tensors'])} pointer(s) ({', '.join(table['tensors'])})",
             f"scalars {', '.join(table['scalars'])}"]
    if table.get("constants"):
        parts.append("fp32 constants " + ", ".join(f"{k} = {v!r}" for k, v in table["constants"].items()))
    parts.append(f"TMA descriptors: {', '.join(table['tensormaps']) or 'none'}")
    return "native kernels (ptx, cuda) take " + "; ".join(parts)


# ---------------------------------------------------------------- TMA descriptors


def _tensormaps(candidate: Candidate) -> list[str]:
    """Tensors TMA can describe at every shape (``evaluator.ptx.abi.tensormap_unfit``)."""
    from evaluator.ptx.abi import DTYPE_BYTES, TensorInfo, tensormap_unfit

    fit = []
    for spec, is_output in [(s, False) for s in candidate.inputs] + [(s, True) for s in candidate.outputs]:
        if spec["dtype"] not in DTYPE_BYTES:
            continue
        info = TensorInfo(spec["name"], tuple(spec["shape"]), spec["dtype"], is_output)
        shapes = [{axis: int(shape[axis]) for axis in candidate.axes} for shape in candidate.shapes]
        if all(tensormap_unfit(info, axes) is None for axes in shapes):
            fit.append(spec["name"])
    return fit


# ---------------------------------------------------------------- constants


def _constants(candidate: Candidate) -> tuple[dict[str, float], list[str], str]:
    """(fp32 constants, notes, why no native kernel can be offered)."""
    if candidate.format == "sol-execbench":
        return _fixed_scalars(candidate)
    return _data_constants(candidate)


def _finite_float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _fixed_scalars(candidate: Candidate) -> tuple[dict[str, float], list[str], str]:
    """SOL-ExecBench scalars fixed at one value: a float becomes an fp32 constant of that name."""
    fixed = [item for item in candidate.adapter.get("parameters", []) if item.get("kind") == "fixed"]
    names = unique([identifier(item["name"], "constant") for item in fixed], taken=_taken(candidate))
    constants: dict[str, float] = {}
    notes = []
    for item, name in zip(fixed, names, strict=False):
        value = item["value"]
        if _finite_float(value):
            constants[name] = value
            notes.append(
                f"scalar input {item['name']!r} = {value!r} reaches native kernels as the fp32 "
                f"constant {name}"
            )
        else:
            notes.append(f"scalar input {item['name']!r} = {value!r} is fixed: a native kernel hard-codes it")
    return constants, notes, ""


def _data_constants(candidate: Candidate) -> tuple[dict[str, float], list[str], str]:
    """GPU MODE data values: the same at every shape (a float: an fp32 constant; otherwise the
    kernel hard-codes it), or equal to one axis at every shape (the kernel gets that scalar).
    One that is neither leaves a native kernel without a value it needs."""
    slots = [
        slot for slot in candidate.adapter.get("data", {}).get("slots", []) if slot.get("role") == "constant"
    ]
    if not slots:
        return {}, [], ""
    recorded = candidate.adapter.get("constants") or {}
    from evaluator.importers.layout import constants_key

    rows = [(axes, recorded.get(constants_key(axes))) for axes in _shape_axes(candidate)]
    if any(values is None for _, values in rows):
        return {}, [], "the task's data holds plain values that were not recorded at every shape"
    constants: dict[str, float] = {}
    notes = []
    names = unique([identifier(slot["name"], "constant") for slot in slots], taken=_taken(candidate))
    for index, name in enumerate(names):
        values = [values[index] for _, values in rows]  # type: ignore[index]
        if all(json.dumps(value) == json.dumps(values[0]) for value in values):
            if _finite_float(values[0]):
                constants[name] = values[0]
                notes.append(
                    f"the data's value {name} = {values[0]!r} reaches native kernels as an fp32 constant"
                )
            else:
                notes.append(
                    f"the data's value {name} = {values[0]!r} is the same at every shape: a native kernel "
                    "hard-codes it"
                )
            continue
        axis = _equal_axis(candidate.axes, rows, index)
        if axis is None:
            return (
                {},
                notes,
                (
                    f"the task's data holds a plain value ({name}: {', '.join(map(repr, values[:4]))}) "
                    "that changes with the shape and is no axis, so a native kernel could not receive it"
                ),
            )
        notes.append(
            f"the data's value {name} equals the axis {axis} at every shape: native kernels get it as "
            "that scalar"
        )
    return constants, notes, ""


def _equal_axis(axes: list[str], rows: list[tuple[dict[str, int], Any]], index: int) -> str | None:
    for axis in axes:
        if all(
            isinstance(values[index], (int, bool)) and int(values[index]) == shape[axis]
            for shape, values in rows
        ):
            return axis
    return None


def _shape_axes(candidate: Candidate) -> list[dict[str, int]]:
    return [{axis: int(shape[axis]) for axis in candidate.axes} for shape in candidate.shapes]


def _taken(candidate: Candidate) -> list[str]:
    """Names a constant may not take: the tensors' and the axes' (they name other parameters)."""
    return [spec["name"] for spec in (*candidate.inputs, *candidate.outputs)] + list(candidate.axes)
