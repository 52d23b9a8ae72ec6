"""SOL-ExecBench problems (github.com/NVIDIA/SOL-ExecBench) in SOLboard's format.

A SOL-ExecBench problem is a folder with ``definition.json`` (name, op_type, description, axes,
inputs, outputs, the reference as a Python source string defining ``run``, optional constraints
and ``custom_inputs_entrypoint``), ``workload.jsonl`` (one workload a line: values of the ``var``
axes, how each input is sourced, an optional tolerance) and, in the published dataset, the same
reference as ``reference.py``. ``sxb_definition`` reads them; this module turns the workloads into
shapes, each with its own tolerance (SOL-ExecBench calibrates one per workload), and the scalar
inputs into axes or fixed values. docs/importing.md lists what each field becomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.importers.common import (
    CPU_SHAPE_MAX_BYTES,
    Candidate,
    Refused,
    check_axis_names,
    check_dtype,
    declared_bytes,
    folders_with,
    majority,
    problem_name,
    rewrite_devices,
)
from evaluator.importers.layout import constants_key
from evaluator.importers.rk_probe import fake_limit
from evaluator.importers.sxb_definition import (
    check_reference,
    read_axes,
    read_definition,
    read_workloads,
    reference_source,
    resolve,
    tensor,
    workload_tolerance,
)

FORMAT = "sol-execbench"
UPSTREAM_REFERENCE = "upstream/reference.py"
#: Definition fields this converter reads or knowingly leaves out.
KNOWN_FIELDS = {"name", "op_type", "description", "axes", "inputs", "outputs", "reference", "constraints",
                "custom_inputs_entrypoint", "hf_id"}


def discover(root: Path) -> list[Path]:
    return folders_with(root, "definition.json")


@dataclass
class _Definition:
    folder: Path
    definition: dict[str, Any]
    source: str
    const: dict[str, int]
    var: list[str]
    expr: dict[str, str]
    tensor_inputs: list[str]
    scalar_inputs: list[str]
    entry: str | None
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def inputs(self) -> dict[str, Any]:
        return self.definition.get("inputs") or {}


def convert(folder: Path, workdir: Path, *, prefix: str = "", atol: float | None = None,
            rtol: float | None = None) -> Candidate:
    """One SOL-ExecBench problem folder as a candidate (``Refused`` says why it cannot be).

    ``atol``/``rtol`` are not used: every SOL-ExecBench workload has a tolerance (its own or the
    default); they are accepted so both formats take the same options."""
    del atol, rtol
    work = _read(folder)
    rewritten, replaced = rewrite_devices(work.source)
    if replaced:
        work.notes.append(f"{replaced} device literal(s) of the reference now follow the device of each call")
    (workdir / "upstream").mkdir(parents=True, exist_ok=True)
    (workdir / UPSTREAM_REFERENCE).write_text(rewritten)
    _check_imports(workdir)
    records = _records(work, workdir)
    parameters, scalar_args, records = _scalars(work, records)
    axes = list(work.definition["axes"]) + [
        name for name in scalar_args if name not in work.definition["axes"]
    ]
    tolerance, shapes = _shapes(work, records, axes)
    candidate = _candidate(work, prefix, axes, parameters, scalar_args, tolerance, shapes, rewritten)
    _add_cpu_shape(work, workdir, candidate)
    return candidate


def _add_cpu_shape(work: _Definition, workdir: Path, candidate: Candidate) -> None:
    """An extra, unranked CPU shape when every workload is too big or computes too much for the
    CPU checks (sxb_cpu_shape)."""
    from evaluator.importers.common import CPU_FLOPS_MAX, CPU_SHAPE_MAX_BYTES, declared_bytes
    from evaluator.importers.sxb_cpu_shape import fake_cost, small_shape

    tensors = candidate.inputs + candidate.outputs
    smallest = min(({a: shape[a] for a in candidate.axes} for shape in candidate.shapes),
                   key=lambda values: declared_bytes(tensors, values))

    def cost(axes: dict[str, int]) -> float | None:
        return fake_cost(
            workdir, UPSTREAM_REFERENCE, candidate.adapter, candidate.inputs, axes, candidate.outputs
        )

    flops = cost(smallest)
    if declared_bytes(tensors, smallest) <= CPU_SHAPE_MAX_BYTES and (flops is None or flops <= CPU_FLOPS_MAX):
        return
    axes = small_shape(
        work.definition, work.const, work.var, work.expr, candidate.shapes, candidate.axes, tensors, cost
    )
    if axes is None:
        return
    candidate.shapes.append({**{axis: axes[axis] for axis in candidate.axes}, "ranked": False})
    changed = [axis for axis in [*work.var, *work.const] if axes[axis] != smallest[axis]]
    shown = ", ".join(f"{axis} {axes[axis]}" for axis in changed)
    candidate.notes.append(
        f"every workload is too big for the CPU checks: an extra unranked CPU shape ({shown}) is "
        "not among the workloads"
        + ("; it changes constant sizes of the definition" if set(changed) & set(work.const) else "")
    )


def _check_imports(workdir: Path) -> None:
    """The reference's module loads here (a missing package is named before anything runs)."""
    from evaluator.importers.rk_probe import missing_package, package_refusal
    from evaluator.importers.runtime import load_upstream

    try:
        load_upstream(workdir, UPSTREAM_REFERENCE)
    except Exception as error:
        package = missing_package(error)
        if package:
            raise package_refusal(package, "the reference") from error
        raise Refused(f"the reference does not import: {type(error).__name__}: {error}") from error


def _read(folder: Path) -> _Definition:
    definition = read_definition(folder)
    const, var, expr = read_axes(definition)
    inputs: dict[str, Any] = definition.get("inputs") or {}
    if set(inputs) & set(definition["outputs"]):
        raise Refused("definition.json: input and output names overlap")
    notes: list[str] = []
    entry = definition.get("custom_inputs_entrypoint") or None
    source = reference_source(folder, definition, notes)
    check_reference(source, list(inputs), entry)
    unknown = sorted(set(definition) - KNOWN_FIELDS)
    if unknown:
        notes.append(f"definition fields not read: {', '.join(unknown)}")
    tensors = [key for key, spec in inputs.items() if spec.get("shape") is not None]
    scalars = [key for key, spec in inputs.items() if spec.get("shape") is None]
    if not tensors:
        raise Refused(
            f"no tensor input: every input is a scalar ({', '.join(scalars) or 'none'}), and SOLboard's "
            "kernels take their inputs as tensors"
        )
    for key in scalars:
        check_dtype(f"scalar input {key!r}", str(inputs[key].get("dtype")))
    return _Definition(folder, definition, source, const, var, expr, tensors, scalars, entry, notes=notes)


# ---------------------------------------------------------------- workloads


def _records(work: _Definition, workdir: Path) -> list[dict[str, Any]]:
    """The workloads every part of SOLboard can express: axes resolved, input sources known."""
    constraints = [str(item) for item in work.definition.get("constraints") or []]
    unchecked: set[str] = set()
    records = []
    for workload in read_workloads(work.folder, work.dropped):
        uuid = workload["uuid"]
        try:
            values = resolve(workload, work.const, work.var, work.expr, constraints, unchecked)
            kinds, scalars = _sources(work, workload.get("inputs") or {})
        except ValueError as error:
            work.dropped.append(f"workload {uuid}: {error}")
            continue
        records.append({"uuid": uuid, "axes": values, "kinds": kinds, "scalars": scalars,
                        "tolerance": workload_tolerance(workload)})
    work.notes += [f"constraint {item!r} is not on axes alone: not checked" for item in sorted(unchecked)]
    if not records:
        raise Refused("no workload could be converted" + (f" ({work.dropped[-1]})" if work.dropped else ""))
    records = _keep_common(work, records, "kinds", "input sources", "differ from the other workloads'")
    if any(value is _CUSTOM for record in records for value in record["scalars"].values()):
        _custom_scalars(work, workdir, records)
    return records


_CUSTOM = object()


def _sources(work: _Definition, given: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    kinds: dict[str, str] = {}
    scalars: dict[str, Any] = {}
    for key in work.inputs:
        descriptor = given.get(key) or {"type": "random"}
        kind = descriptor.get("type", "random")
        if key in work.scalar_inputs:
            if kind == "scalar" and "value" in descriptor:
                scalars[key] = descriptor["value"]
            elif kind == "custom" and work.entry:
                scalars[key] = _CUSTOM
            else:
                raise ValueError(
                    f"scalar input {key!r} is {kind!r}: only fixed values and custom_inputs_entrypoint's "
                    "convert"
                )
        elif kind in ("random", "custom"):
            kinds[key] = kind
        elif kind == "safetensors":
            raise ValueError(
                f"input {key!r} comes from a safetensors file, which the dataset ships apart: a data "
                "dependency (SOLboard draws every input from a generator and reads none from files)"
            )
        else:
            raise ValueError(f"input {key!r} has source {kind!r}")
    if "custom" in kinds.values() and not work.entry:
        raise ValueError("custom inputs but no custom_inputs_entrypoint")
    return kinds, scalars


def _custom_scalars(work: _Definition, workdir: Path, records: list[dict[str, Any]]) -> None:
    """The values custom_inputs_entrypoint gives scalar inputs, per workload (run under fake
    tensors: only its plain numbers are read)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from evaluator.importers.runtime import load_upstream, on_device

    module, family = load_upstream(workdir, UPSTREAM_REFERENCE)
    entry = getattr(module, str(work.entry))
    names: set[str] = set()
    for record in records:
        known = {key: value for key, value in record["scalars"].items() if value is not _CUSTOM}
        wanted = [key for key, value in record["scalars"].items() if value is _CUSTOM]
        names.update(wanted)
        try:
            with FakeTensorMode(allow_non_fake_inputs=True), on_device(family, "cpu", 1):
                produced = dict(entry({**record["axes"], **known}, torch.device("cpu")))
        except Exception as error:  # values decide: run it for real, where it is small
            if not fake_limit(error) or _workload_bytes(work, record["axes"]) > CPU_SHAPE_MAX_BYTES:
                raise Refused(
                    f"custom_inputs_entrypoint gives scalar input(s) {', '.join(wanted)} from values "
                    f"(workload {record['uuid']}, too big to run on the CPU): {type(error).__name__}"
                ) from None
            with on_device(family, "cpu", 1):
                produced = dict(entry({**record["axes"], **known}, torch.device("cpu")))
        for key in wanted:
            value = produced.get(key)
            if isinstance(value, torch.Tensor) or not isinstance(value, (bool, int, float)):
                raise Refused(
                    f"custom_inputs_entrypoint gives scalar input {key!r} as a {type(value).__name__}: "
                    "only plain numbers convert"
                )
            record["scalars"][key] = value
    work.notes.append(
        f"scalar input(s) {', '.join(sorted(names))} come from custom_inputs_entrypoint: read per workload"
    )


def _workload_bytes(work: _Definition, axes: dict[str, int]) -> int:
    specs = [tensor("input", key, work.inputs[key], work.definition["axes"]) for key in work.tensor_inputs]
    return declared_bytes(specs, axes)


def _keep_common(
    work: _Definition, records: list[dict[str, Any]], key: str, label: str, reason: str
) -> list[dict[str, Any]]:
    """The workloads whose ``key`` has the most common value; the others are reported."""
    chosen = majority([record[key] for record in records])
    for record in records:
        if record[key] != chosen:
            work.dropped.append(f"workload {record['uuid']}: {label} {record[key]} {reason} ({chosen} kept)")
    return [record for record in records if record[key] == chosen]


def _scalars(
    work: _Definition, records: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """Integers and booleans become axes passed as keyword ints; a float is fixed at its most
    common value (a kernel receives no float scalars), the other workloads dropped."""
    parameters: list[dict[str, Any]] = []
    scalar_args: list[str] = []
    for key, spec in work.inputs.items():
        if key not in work.scalar_inputs:
            parameters.append({"name": key, "kind": "tensor", "source": records[0]["kinds"][key],
                               "description": spec.get("description")})
            continue
        values = [record["scalars"][key] for record in records]
        if all(isinstance(value, bool) for value in values) or all(
                isinstance(value, int) and not isinstance(value, bool) for value in values):
            kind = "bool" if isinstance(values[0], bool) else "int"
            parameters.append({"name": key, "kind": "axis", "axis": key, "type": kind})
            scalar_args.append(key)
            for record in records:  # a scalar the definition also lists as an axis keeps that axis's value
                record["axes"].setdefault(key, int(record["scalars"][key]))
            work.notes.append(
                f"scalar input {key!r} ({kind}) is an axis, passed to the kernel as the keyword {key}=..."
            )
            continue
        chosen = majority(values)
        for record in records:
            if record["scalars"][key] != chosen:
                work.dropped.append(
                    f"workload {record['uuid']}: scalar {key} = {record['scalars'][key]!r} (only "
                    f"{key} = {chosen!r} kept: a kernel receives no float scalars)"
                )
        records = [record for record in records if record["scalars"][key] == chosen]
        parameters.append({"name": key, "kind": "fixed", "value": chosen})
        work.notes.append(f"scalar input {key!r} is fixed at {chosen!r}: a Python kernel does not receive it")
    check_axis_names(scalar_args)
    return parameters, scalar_args, records


# ---------------------------------------------------------------- shapes and tolerances


def _solboard_tolerance(tolerance: dict[str, Any]) -> dict[str, float]:
    return {"atol": float(tolerance["max_atol"]), "rtol": float(tolerance["max_rtol"]),
            "matched_ratio": float(tolerance["required_matched_ratio"])}


def _strictest(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {"atol": min(a["atol"], b["atol"]), "rtol": min(a["rtol"], b["rtol"]),
            "matched_ratio": max(a["matched_ratio"], b["matched_ratio"])}


def _shapes(
    work: _Definition, records: list[dict[str, Any]], axes: list[str]
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(the problem's tolerance: the most common; the shapes, each with its own where it differs)."""
    shapes: dict[str, dict[str, Any]] = {}
    for record in records:
        values = {axis: record["axes"][axis] for axis in axes}
        own = _solboard_tolerance(record["tolerance"])
        key = constants_key(values)
        if key in shapes:
            work.dropped.append(
                f"workload {record['uuid']}: same shape as another workload (the stricter tolerance "
                "of the two is kept)"
            )
            shapes[key]["tolerance"] = _strictest(shapes[key]["tolerance"], own)
            continue
        shapes[key] = {**values, "ranked": True, "tolerance": own, "uuid": record["uuid"]}
    _tolerance_notes(work, records)
    common = majority([shape["tolerance"] for shape in shapes.values()])
    for shape in shapes.values():
        if shape["tolerance"] == common:
            del shape["tolerance"]
        del shape["uuid"]
    return common, list(shapes.values())


def _tolerance_notes(work: _Definition, records: list[dict[str, Any]]) -> None:
    caps = sorted({str(record["tolerance"]["max_error_cap"]) for record in records
                   if record["tolerance"].get("max_error_cap") is not None})
    if caps:
        work.dropped.append(f"tolerance max_error_cap {', '.join(caps)}: SOLboard has no error cap")
    distinct = {str(_solboard_tolerance(record["tolerance"])) for record in records}
    if len(distinct) > 1:
        work.notes.append(f"{len(distinct)} different workload tolerances: each shape keeps its own")
    if not all(record["tolerance"].get("allow_negative_inf") for record in records):
        work.notes.append(
            "SOLboard accepts an output of -inf (or +inf, NaN) where the reference has the same value; "
            "SOL-ExecBench without allow_negative_inf fails any non-finite value"
        )


def _candidate(work: _Definition, prefix: str, axes: list[str], parameters: list[dict[str, Any]],
               scalar_args: list[str], tolerance: dict[str, float], shapes: list[dict[str, Any]],
               rewritten: str) -> Candidate:
    definition = work.definition
    upstream = str(definition["name"])
    inputs = [tensor("input", key, work.inputs[key], definition["axes"]) for key in work.tensor_inputs]
    outputs = []
    for key, spec in definition["outputs"].items():
        if spec.get("shape") is None:
            work.notes.append(f"output {key!r} is a Python scalar upstream: here a 0-d tensor")
            spec = {**spec, "shape": []}
        outputs.append(tensor("output", key, spec, definition["axes"]))
    counts_path = work.folder / "counts.py"
    return Candidate(
        source=work.folder,
        format=FORMAT,
        upstream_name=upstream,
        name=problem_name(upstream, prefix),
        title=f"{upstream} (SOL-ExecBench)"[:200],
        description=_description(definition, parameters),
        axes=axes,
        inputs=inputs,
        outputs=outputs,
        tolerance=tolerance,
        shapes=shapes,
        baseline="the SOL-ExecBench reference run(), its results copied into the outputs",
        adapter={
            "format": FORMAT,
            "upstream": UPSTREAM_REFERENCE,
            "op_type": definition.get("op_type"),
            "custom_entrypoint": work.entry,
            "parameters": parameters,
            "outputs": list(definition["outputs"]),
        },
        files={UPSTREAM_REFERENCE: rewritten},
        counts_source=counts_path.read_text() if counts_path.is_file() else None,
        scalar_args=scalar_args,
        dropped=work.dropped,
        notes=work.notes,
    )


def _description(definition: dict[str, Any], parameters: list[dict[str, Any]]) -> str:
    lines = [str(definition.get("description") or definition["name"]).strip(), ""]
    extras = [f"op_type {definition['op_type']}"] if definition.get("op_type") else []
    extras += [f"from {definition['hf_id']}"] if definition.get("hf_id") else []
    lines.append(f"Imported from SOL-ExecBench definition {definition['name']}"
                 + (f" ({', '.join(extras)})" if extras else "") + ".")
    for title, specs in (("Inputs", definition.get("inputs") or {}), ("Outputs", definition["outputs"])):
        described = [
            f"{key}: {spec['description']}" for key, spec in specs.items() if spec.get("description")
        ]
        if described:
            lines.append(f"{title}: " + "; ".join(described) + ".")
    fixed = [f"{item['name']} = {item['value']!r}" for item in parameters if item["kind"] == "fixed"]
    if fixed:
        lines.append(
            "Fixed scalars (not passed to a Python kernel; a native kernel gets a float one as an fp32 "
            "constant; a solution.json's entry point receives them): " + ", ".join(fixed) + "."
        )
    return "\n".join(lines)
