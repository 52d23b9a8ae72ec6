"""GPU MODE reference-kernels tasks (github.com/gpu-mode/reference-kernels) in SOLboard's format.

A task is a folder ``problems/<set>/<task>/`` with ``task.yml`` (files, lang, description, tests and
benchmarks: lists of keyword arguments of ``generate_input``, each with a seed), ``reference.py``
(``generate_input(**spec) -> data``, ``ref_kernel(data) -> output``, ``check_implementation``),
``task.py`` (the ``input_t``/``output_t`` type names) and helpers such as the set's ``utils.py``.

Nothing in a task declares its tensors, so the conversion reads what it can from the files first
(``rk_task``: cheap refusals before any code runs), then runs the task's code (``rk_probe``):
every spec under torch's fake tensors (structure, shapes, dtypes, the check's tolerance), the
smallest for real to tell inputs from output buffers; ``rk_declare`` turns the probes into
declared tensors and tolerances. The problem is named ``<set>_<task>``
(``pmpp_v2_vectoradd_py``), so tasks of the same name in two sets stay apart. docs/importing.md
lists what each field becomes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.importers.common import (
    CPU_SHAPE_HEAVY_BYTES,
    CPU_SHAPE_MAX_BYTES,
    Candidate,
    Refused,
    check_dtype,
    folders_with,
    majority,
    problem_name,
    rewrite_devices,
)
from evaluator.importers.layout import constants_key, signature
from evaluator.importers.rk_declare import data_slots, declare, leaf_names, result_names, tolerances
from evaluator.importers.rk_probe import (
    UPSTREAM,
    Buffers,
    Probe,
    Upstream,
    find_buffers,
    probe,
    probe_for_real,
    unknown_tolerance,
)
from evaluator.importers.rk_task import (
    Parameters,
    Spec,
    carried_notes,
    check_contract,
    classify,
    declared_tolerance,
    dim_hints,
    functions,
    match_defaults,
    names_from_source,
    parameters_of,
    read_specs,
    read_task,
    task_files,
)

FORMAT = "reference-kernels"


def discover(root: Path) -> list[Path]:
    return folders_with(root, "task.yml")


@dataclass
class _Task:
    """What the steps of one conversion share."""

    folder: Path
    task: dict[str, Any]
    staged: dict[str, str]
    tree: ast.Module
    parameters: Parameters
    specs: list[Spec]
    takes_seed: bool
    constant_tolerance: dict[str, float] | None
    tolerance_override: dict[str, float] | None = None
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def convert(folder: Path, workdir: Path, *, prefix: str = "", atol: float | None = None,
            rtol: float | None = None) -> Candidate:
    """One task folder as a candidate (``Refused`` says why it cannot be)."""
    work = _read(folder, workdir)
    work.tolerance_override = {"atol": atol, "rtol": rtol} if atol is not None and rtol is not None else None
    upstream = Upstream(workdir, work.parameters, work.takes_seed)
    probes, unprobed = _probe_specs(work, upstream)
    smallest = min(probes, key=Probe.data_bytes)
    if smallest.data_bytes() > CPU_SHAPE_HEAVY_BYTES:
        raise Refused(
            f"no test or benchmark is small enough to run on the CPU (the smallest, {smallest.spec.where}, "
            f"holds {smallest.data_bytes() / 1e6:.0f} MB)"
        )
    buffers = find_buffers(upstream, smallest.spec, smallest.data_spec, probes)
    return _candidate(work, probes, unprobed, buffers, prefix)


# ---------------------------------------------------------------- reading (no code runs)


def _read(folder: Path, workdir: Path) -> _Task:
    task = read_task(folder)
    files = task_files(folder, task)
    notes = carried_notes(task)
    dropped: list[str] = []
    staged = _stage(files, workdir, notes)
    tree = ast.parse(staged[f"{UPSTREAM}/reference.py"])
    check_contract(tree)
    accepted, required, open_kwargs = parameters_of(functions(tree)["generate_input"])
    specs = read_specs(task, dropped)
    parameters, specs = classify(specs, dropped, notes)
    given = [item["name"] for item in parameters.items] + [parameters.distribution_parameter or ""]
    unknown = [name for name in given if name and name not in accepted and not open_kwargs]
    if unknown:
        raise Refused(f"generate_input{tuple(accepted)} takes no {', '.join(unknown)} (given by task.yml)")
    needed = sorted(required - set(given) - {"seed"})
    if needed:
        raise Refused(f"generate_input needs {', '.join(needed)}, which no test or benchmark gives")
    if any(str(spec.values.get("seed", "")) for spec in specs):
        notes.append(
            "the seeds of task.yml's tests and benchmarks are not used: SOLboard seeds every call itself"
        )
    constant = declared_tolerance(tree, match_defaults(staged.get(f"{UPSTREAM}/utils.py")))
    return _Task(folder, task, staged, tree, parameters, specs, takes_seed="seed" in accepted or open_kwargs,
                 constant_tolerance=constant, dropped=dropped, notes=notes)


def _stage(files: dict[str, Path], workdir: Path, notes: list[str]) -> dict[str, str]:
    """The upstream files, device literals rewritten, written into the staging folder."""
    staged: dict[str, str] = {}
    replaced = 0
    for file_name, path in files.items():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise Refused(f"file {file_name}: {error}") from error
        if file_name.endswith(".py"):
            try:
                text, count = rewrite_devices(text)
            except SyntaxError as error:
                raise Refused(f"{file_name} is not valid Python: {error}") from error
            replaced += count
        staged[f"{UPSTREAM}/{file_name}"] = text
        (workdir / UPSTREAM).mkdir(parents=True, exist_ok=True)
        (workdir / UPSTREAM / file_name).write_text(text)
    if replaced:
        notes.append(f"{replaced} device literal(s) (\"cuda\", .cuda()) now follow the device of each call")
    return staged


# ---------------------------------------------------------------- probing (code runs)


def _magnitude(spec: Spec) -> float:
    product = 1.0
    for value in spec.values.values():
        if isinstance(value, int) and not isinstance(value, bool):
            product *= max(abs(value), 1)
    return product


def _probe_specs(work: _Task, upstream: Upstream) -> tuple[list[Probe], list[Spec]]:
    """(probes, specs left unprobed). Every spec under fake tensors, smallest first; a spec fake
    tensors cannot follow runs for real when its data fits the CPU (benchmarks above that are left
    unprobed: their sizes follow the others'). The first probe settles whether the tolerance can be
    read, so a task whose check is not a comparison is refused before the larger specs run."""
    probes: list[Probe] = []
    unprobed: list[Spec] = []
    check = work.constant_tolerance is None
    for spec in sorted(work.specs, key=_magnitude):
        found = _probe_one(work, upstream, spec, check)
        if found is None:
            if spec in work.specs:
                unprobed.append(spec)
            continue
        if check and not probes and found.tolerances is None and work.tolerance_override is None:
            raise Refused(unknown_tolerance(found.check_note))
        probes.append(found)
    if not probes:
        if unprobed and not work.dropped:
            raise Refused(
                "no test or benchmark could run: fake tensors cannot follow the reference (values decide its "
                "work) and every spec's data is above the 64 MiB the CPU runs for real (a task for a GPU)"
            )
        raise Refused("no test or benchmark runs" + (f" ({work.dropped[-1]})" if work.dropped else ""))
    order = {id(spec): index for index, spec in enumerate(work.specs)}  # task.yml's order, for the shapes
    probes.sort(key=lambda found: order.get(id(found.spec), len(order)))
    unprobed.sort(key=lambda spec: order.get(id(spec), len(order)))
    return _one_structure(probes, work.dropped), unprobed


def _probe_one(work: _Task, upstream: Upstream, spec: Spec, check: bool) -> Probe | None:
    """One spec's probe; None when it could not be probed (or was dropped: ``spec`` is then gone
    from ``work.specs``)."""
    try:
        found, size = probe(upstream, spec, check)
        if found is None and (
            size is None and not spec.ranked or size is not None and size <= CPU_SHAPE_MAX_BYTES
        ):
            found = probe_for_real(upstream, spec, check)
    except Refused:
        raise
    except Exception as error:
        if _out_of_memory(error):
            raise
        work.dropped.append(
            f"{spec.where}: generate_input or ref_kernel fails: {type(error).__name__}: {error}"
        )
        work.specs.remove(spec)
        return None
    return found


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or "can't allocate memory" in str(error)


def _one_structure(probes: list[Probe], dropped: list[str]) -> list[Probe]:
    """The probes whose data and result have the most common structure and dtypes; the others
    are dropped (a parameter that changes a tensor's dtype, such as a mask of ones)."""
    keys = [signature(p.data_spec, p.data) + signature(p.result_spec, p.results) for p in probes]
    chosen = majority(keys)
    for key, found in zip(keys, probes, strict=False):
        if key != chosen:
            dropped.append(f"{found.spec.where}: its data has other tensors or dtypes than the other specs'")
    return [found for key, found in zip(keys, probes, strict=False) if key == chosen]


# ---------------------------------------------------------------- the candidate


def _candidate(
    work: _Task, probes: list[Probe], unprobed: list[Spec], buffers: Buffers, prefix: str
) -> Candidate:
    axis_order = work.parameters.axes
    if not axis_order:
        raise Refused("generate_input has no integer parameter: SOLboard needs at least one axis")
    first = probes[0]
    top_count = len(names_from_source(work.tree, 0)) or _top_count(first)
    names = leaf_names(first.data, names_from_source(work.tree, top_count), taken=axis_order)
    slots = data_slots(first, buffers, names)
    outputs = result_names(first, buffers, slots, taken=names + axis_order)
    inputs_decl, outputs_decl = _declare_tensors(work, probes, buffers, slots, outputs)
    for i in buffers.why:
        work.notes.append(f"data leaf {i} ({slots[i].name}) is an output buffer: {buffers.why[i]}")
    for i in sorted(buffers.unused - set(buffers.pairs.values())):
        work.notes.append(
            f"data leaf {i} ({slots[i].name}) does not change the reference's result; it stays an input"
        )
    tolerance, per_output, per_shape = tolerances(
        work.constant_tolerance, work.tolerance_override, probes, outputs, work.notes
    )
    constants = _constants(probes, slots)
    shapes = _shapes(work, probes, per_shape) + _unprobed_shapes(work, unprobed, probes, bool(constants))
    set_name, task_name = work.folder.parent.name, work.folder.name
    layout_text = ", ".join(f"{slot.name} ({slot.role})" for slot in slots if slot.role != "constant")
    description = "\n".join(
        [
            str(work.task.get("description") or task_name).strip(),
            "",
            (
                f"Imported from GPU MODE reference-kernels task {set_name}/{task_name}. The upstream "
                f"data holds {layout_text}; a kernel receives the inputs, then the outputs "
                f"({', '.join(outputs)}), and writes the outputs in place (a submission.py with "
                "custom_kernel(data) is accepted as it is)."
            ),
        ]
    ).strip()
    return Candidate(
        source=work.folder,
        format=FORMAT,
        upstream_name=f"{set_name}/{task_name}",
        name=problem_name(f"{set_name}_{task_name}", prefix),
        title=f"{task_name} (GPU MODE {set_name})"[:200],
        description=description,
        axes=axis_order,
        inputs=inputs_decl,
        outputs=outputs_decl,
        tolerance=tolerance,
        output_tolerances=per_output,
        shapes=shapes,
        baseline="the task's ref_kernel(data), its result copied into the outputs",
        adapter=_adapter(work, first, slots, outputs, constants),
        files=work.staged,
        counts_source=_counts_source(work.folder),
        distributions=work.parameters.distributions,
        dropped=work.dropped,
        notes=list(dict.fromkeys(work.notes)),
    )


def _top_count(found: Probe) -> int:
    heads = {leaf.path[0] for leaf in found.data if leaf.path}
    return len(heads) or 1


def _counts_source(folder: Path) -> str | None:
    path = folder / "counts.py"
    return path.read_text() if path.is_file() else None


def _declare_tensors(work: _Task, probes: list[Probe], buffers: Buffers, slots: list[Any],
                     outputs: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    axis_order = work.parameters.axes
    param_to_axis = {item["name"]: item["axis"] for item in work.parameters.items if item["kind"] == "axis"}
    hints = dim_hints(work.tree, _top_count(probes[0]))

    def hint_for(slot_index: int) -> list[str | None] | None:
        path = probes[0].data[slot_index].path
        if len(path) > 1 or not path or not path[0].isdigit() or int(path[0]) >= len(hints):
            return None
        raw = hints[int(path[0])]
        return [param_to_axis.get(item or "") for item in raw] if raw else None

    inputs = []
    for slot in slots:
        if slot.role == "input":
            picks = [(p.axes, p.data[slot.leaf]) for p in probes]
            spec = declare(slot.name, picks, axis_order, hint_for(slot.leaf), work.notes)
            inputs.append({**spec, "dtype": check_dtype(f"input {slot.name!r}", spec["dtype"])})
    declared = []
    for j, name in enumerate(outputs):
        if j in buffers.pairs:
            picks = [(p.axes, p.data[buffers.pairs[j]]) for p in probes]
            spec = declare(name, picks, axis_order, hint_for(buffers.pairs[j]), work.notes)
        else:
            tensors = [[leaf for leaf in p.results if leaf.is_tensor] for p in probes]
            spec = declare(
                name,
                [(p.axes, t[j]) for p, t in zip(probes, tensors, strict=False)],
                axis_order,
                None,
                work.notes,
            )
        declared.append({**spec, "dtype": check_dtype(f"output {name!r}", spec["dtype"])})
    if not inputs:
        raise Refused("every data item is an output: the task has no input")
    return inputs, declared


def _shapes(work: _Task, probes: list[Probe], per_shape: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """One shape per distinct axes (tests unranked, benchmarks ranked; a spec listed as both ranks)."""
    shapes: dict[str, dict[str, Any]] = {}
    for found in probes:
        key = constants_key(found.axes)
        if key in shapes:
            shapes[key]["ranked"] |= found.spec.ranked
            continue
        shapes[key] = {**found.axes, "ranked": found.spec.ranked}
        if key in per_shape:
            shapes[key]["tolerance"] = {**per_shape[key], "matched_ratio": 1.0}
    if not any(shape["ranked"] for shape in shapes.values()):
        work.notes.append("no benchmarks: every shape is unranked")
    return list(shapes.values())


def _unprobed_shapes(work: _Task, unprobed: list[Spec], probes: list[Probe], has_constants: bool
                     ) -> list[dict[str, Any]]:
    """Specs fake tensors could not follow and too big to run here: shapes whose sizes follow the
    probed ones' (validation runs them for real where they fit the CPU), unless the data has
    plain values, which only a run can give."""
    probed = {constants_key(found.axes) for found in probes}
    shapes: dict[str, dict[str, Any]] = {}
    for spec in unprobed:
        axes = work.parameters.axes_of(spec)
        if constants_key(axes) in probed:
            continue
        if has_constants:
            work.dropped.append(
                f"{spec.where}: fake tensors cannot follow its code and it is too big to run on the "
                "CPU, so its data's plain values are unknown"
            )
            continue
        shapes.setdefault(constants_key(axes), {**axes, "ranked": spec.ranked})["ranked"] |= spec.ranked
    if shapes:
        work.notes.append(
            "not probed under fake tensors (values decide its shapes; too big for the CPU), sizes "
            f"following the other specs': {', '.join(spec.where for spec in unprobed)}"
        )
    return list(shapes.values())


def _constants(probes: list[Probe], slots: list[Any]) -> dict[str, list[Any]]:
    """The data's plain values at each shape; refused when two distributions of one shape differ."""
    table: dict[str, list[Any]] = {}
    positions = [slot.leaf for slot in slots if slot.role == "constant"]
    if not positions:
        return table
    for found in probes:
        values = [found.data[i].value for i in positions]
        key = constants_key(found.axes)
        if table.setdefault(key, values) != values:
            raise Refused(f"the data's plain values differ between distributions of one shape ({key})")
    return table


def _adapter(work: _Task, first: Probe, slots: list[Any], outputs: list[str],
             constants: dict[str, list[Any]]) -> dict[str, Any]:
    parameters = list(work.parameters.items) + ([{"name": "seed", "kind": "seed"}] if work.takes_seed else [])
    selector = work.parameters.distribution_parameter
    values = {}
    if selector:
        from evaluator.importers.rk_task import distribution_name

        values = {distribution_name(spec.values[selector]): spec.values[selector] for spec in work.specs}
    result_slots, names = [], iter(outputs)
    for leaf in first.results:
        result_slots.append(
            {"role": "output", "name": next(names)} if leaf.is_tensor else {"role": "constant"}
        )
    return {
        "format": FORMAT,
        "upstream": f"{UPSTREAM}/reference.py",
        "generate": "generate_input",
        "reference": "ref_kernel",
        "task": f"{UPSTREAM}/task.py" if f"{UPSTREAM}/task.py" in work.staged else None,
        "parameters": parameters,
        "distribution_parameter": selector,
        "distribution_values": values,
        "data": {
            "spec": first.data_spec,
            "slots": [{"role": slot.role, "name": slot.name} for slot in slots],
        },
        "result": {"spec": first.result_spec, "slots": result_slots},
        "constants": constants,
    }
