"""Declaring a reference-kernels task's tensors from its probes: names, roles, and how each
dimension follows the spec's integer parameters.

A dimension becomes the axis that equals it at every probed spec, else a constant, ``AXIS+n``,
``AXIS/n``, ``n*AXIS``, ``AXIS*AXIS``, ``AXIS/AXIS`` or ``AXIS - AXIS + n`` (a convolution's
``size - kernelsize + 1``), the first form that fits every spec; otherwise the task is refused with
the sizes it saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from evaluator.importers.common import Refused, identifier, majority, unique
from evaluator.importers.layout import Leaf, constants_key
from evaluator.importers.rk_probe import Buffers, Probe, unknown_tolerance

Values = list[tuple[dict[str, int], int]]


def infer_dim(
    values: Values, axis_order: list[str], used: list[str], hint: str | None = None
) -> tuple[str | int, str]:
    """How one dimension follows the axes over the probed specs: (dimension, note). When several
    axes fit every spec, ``hint`` (the parameter generate_input's source sizes it with) decides,
    else the first axis the tensor does not use yet."""
    matches = [axis for axis in axis_order if all(axes[axis] == size for axes, size in values)]
    if matches:
        if hint in matches:
            return str(hint), ""
        chosen = ([axis for axis in matches if axis not in used] or matches)[0]
        note = (
            f"matches axes {', '.join(matches)} in every shape; {chosen} chosen" if len(matches) > 1 else ""
        )
        return chosen, note
    sizes = {size for _, size in values}
    if len(sizes) == 1:
        return sizes.pop(), ""
    for form in _forms(axis_order):
        if all(_fits(form, axes, size) for axes, size in values):
            return form[0], ""
    shown = ", ".join(f"{size} at {axes}" for axes, size in values[:4])
    raise Refused(f"a dimension ({shown}) is neither an axis, a constant, AXIS+n, AXIS/n, n*AXIS, AXIS*AXIS, "
                  "AXIS/AXIS nor AXIS - AXIS + n: declare the task's sizes as parameters of generate_input")


Size = Callable[[dict[str, int]], "int | None"]
Form = tuple[str, Size]


def _fits(form: Form, axes: dict[str, int], size: int) -> bool:
    return form[1](axes) == size


def _offset(axis: str, offset: int) -> Size:
    return lambda axes: axes[axis] + offset


def _divided(axis: str, parts: int) -> Size:
    return lambda axes: axes[axis] // parts if axes[axis] % parts == 0 else None


def _times(axis: str, factor: int) -> Size:
    return lambda axes: factor * axes[axis]


def _product(first: str, second: str) -> Size:
    return lambda axes: axes[first] * axes[second]


def _ratio(first: str, second: str) -> Size:
    return lambda axes: (
        axes[first] // axes[second] if axes[second] and axes[first] % axes[second] == 0 else None
    )


def _difference(first: str, second: str, offset: int) -> Size:
    return lambda axes: axes[first] - axes[second] + offset


def _forms(axis_order: list[str]) -> Iterator[Form]:
    """Candidate dimension forms, simplest first."""
    for axis in axis_order:
        for offset in range(-8, 9):
            if offset:
                yield f"{axis}{'+' if offset > 0 else '-'}{abs(offset)}", _offset(axis, offset)
    for axis in axis_order:
        for n in (2, 3, 4, 8, 16, 32, 64, 128):
            yield f"{axis}/{n}", _divided(axis, n)
            yield f"{n}*{axis}", _times(axis, n)
    for first in axis_order:
        for second in axis_order:
            if first == second:
                continue
            yield f"{first}*{second}", _product(first, second)
            yield f"{first}/{second}", _ratio(first, second)
            for offset in range(-2, 3):
                text = f"{first} - {second}" + (
                    f" + {offset}" if offset > 0 else f" - {-offset}" if offset else ""
                )
                yield text, _difference(first, second, offset)


# ---------------------------------------------------------------- names and roles


@dataclass
class Slot:
    role: str  # input, output, constant
    name: str
    leaf: int  # index among the data leaves


def leaf_names(leaves: list[Leaf], top_names: list[str | None], taken: list[str]) -> list[str]:
    """A Python identifier per data leaf: the top-level item's name (from the source), then the
    keys below it (``weights["norm.weight"]`` -> ``weights_norm_weight``)."""
    raw = []
    for leaf in leaves:
        parts = list(leaf.path)
        head = parts[0] if parts else "input"
        if parts and head.isdigit() and int(head) < len(top_names):
            head = top_names[int(head)] or f"input{head}"
        elif not parts:
            head = top_names[0] if top_names and top_names[0] else "input"
        raw.append(identifier("_".join([head, *parts[1:]]), "input"))
    return unique(raw, taken=taken)


def data_slots(probe: Probe, buffers: Buffers, names: list[str]) -> list[Slot]:
    slots = []
    buffer_leaves = set(buffers.pairs.values())
    for index, leaf in enumerate(probe.data):
        role = "constant" if not leaf.is_tensor else "output" if index in buffer_leaves else "input"
        slots.append(Slot(role, names[index] if role != "constant" else f"constant{index}", index))
    return slots


def result_names(probe: Probe, buffers: Buffers, slots: list[Slot], taken: list[str]) -> list[str]:
    """A name per result tensor: its buffer's, else ``output`` (``output0``... when several)."""
    tensors = [leaf for leaf in probe.results if leaf.is_tensor]
    fresh = [j for j in range(len(tensors)) if j not in buffers.pairs]
    names = []
    for j in range(len(tensors)):
        if j in buffers.pairs:
            names.append(slots[buffers.pairs[j]].name)
        else:
            base = "output" if len(fresh) == 1 else f"output{j}"
            names.append(unique([base], taken + names)[0])
    return names


# ---------------------------------------------------------------- declared tensors


def declare(label: str, picks: list[tuple[dict[str, int], Leaf]], axis_order: list[str],
            hint: list[str | None] | None, notes: list[str]) -> dict[str, Any]:
    """A tensor spec (name, shape in axes, dtype) from the same leaf at every probe."""
    ranks = {len(leaf.shape or ()) for _, leaf in picks}
    if len(ranks) > 1:
        raise Refused(f"{label}: its number of dimensions changes with the shape")
    shape: list[str | int] = []
    for dim in range(ranks.pop()):
        dim_hint = hint[dim] if hint and dim < len(hint) else None
        values = [(axes, int((leaf.shape or ())[dim])) for axes, leaf in picks]
        try:
            inferred, note = infer_dim(values, axis_order, [str(item) for item in shape], dim_hint)
        except Refused as error:
            raise Refused(f"{label} dimension {dim}: {error}") from None
        if note:
            notes.append(f"{label} dimension {dim} {note}")
        shape.append(inferred)
    return {"name": label, "shape": shape, "dtype": str(picks[0][1].dtype)}


# ---------------------------------------------------------------- tolerances


def _strictest(tolerances: list[dict[str, float]]) -> dict[str, float]:
    return {
        "atol": min(item["atol"] for item in tolerances),
        "rtol": min(item["rtol"] for item in tolerances),
    }


def tolerances(constant: dict[str, float] | None, given: dict[str, float] | None, probes: list[Probe],
               outputs: list[str], notes: list[str]
               ) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(the problem's tolerance, per-output ones, per-shape ones by constants key): the constant one
    of make_match_reference, else what check_implementation compared at each probe, else ``given``
    (--atol/--rtol)."""
    if constant is not None:
        notes.append(
            "tolerance read from make_match_reference: atol {atol:g}, rtol {rtol:g}".format(**constant)
        )
        return {**constant, "matched_ratio": 1.0}, {}, {}
    missing = [p for p in probes if p.tolerances is None]
    if missing:
        if given is None:
            raise Refused(unknown_tolerance(missing[0].check_note))
        notes.append(f"tolerance atol {given['atol']:g}, rtol {given['rtol']:g} given on the command line "
                     f"({missing[0].check_note})")
        return {**given, "matched_ratio": 1.0}, {}, {}
    lists = [[dict(item) for item in p.tolerances or []] for p in probes]
    if all(item == lists[0] for item in lists):
        return _per_output(notes, lists[0], outputs)
    per_shape: dict[str, dict[str, float]] = {}
    for p, items in zip(probes, lists, strict=False):
        key = constants_key(p.axes)
        per_shape[key] = _strictest([*items, per_shape[key]] if key in per_shape else items)
    common = majority(list(per_shape.values()))
    notes.append(
        "tolerance read from check_implementation at each shape (it depends on the size): "
        + "; ".join(f"{key}: atol {v['atol']:.3g}, rtol {v['rtol']:.3g}" for key, v in per_shape.items())
    )
    return {**common, "matched_ratio": 1.0}, {}, {key: v for key, v in per_shape.items() if v != common}


def _per_output(notes: list[str], items: list[dict[str, float]], outputs: list[str]
                ) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    common = majority(items)
    per_output = {name: item for name, item in zip(outputs, items, strict=False) if item != common}
    notes.append(
        "tolerance read from check_implementation: "
        + ", ".join(
            f"{name} atol {item['atol']:g}, rtol {item['rtol']:g}"
            for name, item in zip(outputs, items, strict=False)
        )
    )
    return {**common, "matched_ratio": 1.0}, per_output, {}
