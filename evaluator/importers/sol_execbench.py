"""SOL-ExecBench problems (github.com/NVIDIA/SOL-ExecBench) in SOLboard's format.

A SOL-ExecBench problem is a folder with ``definition.json`` (name, op_type, description, axes,
inputs, outputs, the reference as a Python source string defining ``run``, optional constraints
and ``custom_inputs_entrypoint``), ``workload.jsonl`` (one workload a line: values of the ``var``
axes, how each input is sourced, an optional tolerance) and, in the published dataset, the same
reference as ``reference.py``. docs/importing.md lists what each field becomes.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from evaluator.importers.common import (
    Candidate,
    Refused,
    check_axis_names,
    check_dtype,
    digest_files,
    evaluate,
    flag_shapes,
    folders_with,
    majority,
    problem_name,
    rewrite_devices,
    shape_id,
)

FORMAT = "sol-execbench"
UPSTREAM_REFERENCE = "upstream/reference.py"
#: Workload tolerance defaults (SOL-ExecBench's ToleranceSpec).
DEFAULT_TOLERANCE = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99,
                     "max_error_cap": None, "allow_negative_inf": False}
#: Definition fields this converter reads or knowingly leaves out.
KNOWN_FIELDS = {"name", "op_type", "description", "axes", "inputs", "outputs", "reference", "constraints",
                "custom_inputs_entrypoint", "hf_id"}


def discover(root: Path) -> list[Path]:
    return folders_with(root, "definition.json")


def _read_definition(folder: Path) -> dict[str, Any]:
    try:
        definition = json.loads((folder / "definition.json").read_text())
    except (OSError, ValueError) as error:
        raise Refused(f"definition.json: {error}") from error
    if not isinstance(definition, dict):
        raise Refused("definition.json is not a JSON object")
    for key in ("name", "axes", "outputs"):
        if not definition.get(key):
            raise Refused(f"definition.json has no {key}")
    for key in ("axes", "inputs", "outputs"):
        if not isinstance(definition.get(key) or {}, dict):
            raise Refused(f"definition.json: {key} must be an object")
    return definition


def _reference_source(folder: Path, definition: dict[str, Any], notes: list[str]) -> str:
    inline = definition.get("reference")
    path = folder / "reference.py"
    on_disk = path.read_text() if path.is_file() else None
    if not inline and not on_disk:
        raise Refused("missing reference: definition.json has no reference and there is no reference.py")
    if inline and on_disk is not None and on_disk.strip() != str(inline).strip():
        notes.append("reference.py differs from definition.json's reference: the definition's is used")
    return str(inline or on_disk)


def _check_reference(source: str, inputs: list[str], entry: str | None) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise Refused(f"the reference is not valid Python: {error}") from error
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    if "run" not in functions:
        raise Refused("the reference defines no top-level run()")
    arguments = functions["run"].args
    params = [arg.arg for arg in arguments.posonlyargs + arguments.args]
    if params != inputs:
        raise Refused(f"run{tuple(params)} does not take the definition's inputs {tuple(inputs)} in order")
    if entry and entry not in functions:
        raise Refused(f"custom_inputs_entrypoint {entry!r} is not defined in the reference")


def _axes(definition: dict[str, Any]) -> tuple[dict[str, int], list[str], dict[str, str]]:
    const, var, expr = {}, [], {}
    for name, axis in definition["axes"].items():
        kind = axis.get("type") if isinstance(axis, dict) else None
        if kind == "const" and isinstance(axis.get("value"), int):
            const[name] = int(axis["value"])
        elif kind == "var":
            var.append(name)
        elif kind == "expr" and isinstance(axis.get("expression"), str):
            expr[name] = axis["expression"]
        else:
            raise Refused(f"axis {name!r}: {axis!r} is not a const, var or expr axis")
    check_axis_names(definition["axes"])
    return const, var, expr


def _tensor(where: str, name: str, spec: dict[str, Any], axes: dict[str, Any]) -> dict[str, Any]:
    shape: list[str | int] = []
    for dim in spec["shape"]:
        if isinstance(dim, int) or (isinstance(dim, str) and dim.isdigit()):
            shape.append(int(dim))
        elif dim in axes:
            shape.append(dim)
        else:
            raise Refused(f"{where} {name!r}: dimension {dim!r} is not an axis")
    return {"name": name, "shape": shape, "dtype": check_dtype(f"{where} {name!r}", str(spec.get("dtype")))}


def _workloads(folder: Path, dropped: list[str]) -> list[dict[str, Any]]:
    path = folder / "workload.jsonl"
    if not path.is_file():
        raise Refused("shapes missing: there is no workload.jsonl")
    workloads = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            workload = json.loads(line)
        except ValueError as error:
            dropped.append(f"workload.jsonl line {number}: not JSON ({error})")
            continue
        if not isinstance(workload, dict) or not isinstance(workload.get("axes", {}), dict):
            dropped.append(f"workload.jsonl line {number}: not a workload object")
            continue
        workload.setdefault("uuid", f"line {number}")
        workloads.append(workload)
    if not workloads:
        raise Refused("shapes missing: workload.jsonl holds no workload")
    return workloads


def _resolve(
    workload: dict[str, Any], const: dict[str, int], var: list[str], expr: dict[str, str], constraints: list[str],
    unchecked: set[str],
) -> dict[str, int]:
    """Every axis of one workload, or ValueError saying why the workload cannot be used. A
    constraint on tensor values (``kv_indptr[-1].item()``) cannot be checked here: it goes to
    ``unchecked`` and the workload stays."""
    given = workload.get("axes", {})
    missing = [name for name in var if name not in given]
    if missing:
        raise ValueError(f"gives no value for the var axes {missing}")
    values: dict[str, int] = dict(const)
    for name in var:
        value = given[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"axis {name} = {value!r} is not a non-negative integer")
        values[name] = value
    pending = dict(expr)
    while pending:
        progress = False
        for name, expression in list(pending.items()):
            try:
                result = evaluate(expression, values)
            except ValueError:
                continue
            except ArithmeticError as error:
                raise ValueError(f"axis {name} = {expression}: {error}") from error
            if not float(result).is_integer() or result < 0:
                raise ValueError(f"axis {name} = {expression} = {result} is not a non-negative integer")
            values[name] = int(result)
            del pending[name]
            progress = True
        if not progress:
            raise ValueError(f"expression axes {sorted(pending)} cannot be evaluated")
    for constraint in constraints:
        try:
            ok = evaluate(constraint, values)
        except (ValueError, ArithmeticError, SyntaxError):
            unchecked.add(constraint)
            continue
        if not ok:
            raise ValueError(f"violates the constraint {constraint!r}")
    return values


def convert(folder: Path, workdir: Path, *, prefix: str = "", atol: float | None = None,
            rtol: float | None = None) -> Candidate:
    """One SOL-ExecBench problem folder as a candidate (``Refused`` says why it cannot be).

    ``atol``/``rtol`` are not used: every SOL-ExecBench workload has a tolerance (its own or the
    default); they are accepted so both formats take the same options."""
    del workdir, atol, rtol
    dropped: list[str] = []
    notes: list[str] = []
    definition = _read_definition(folder)
    upstream = str(definition["name"])
    name = problem_name(upstream, prefix)
    const, var, expr = _axes(definition)
    axis_names = list(definition["axes"])
    inputs_def: dict[str, Any] = definition.get("inputs") or {}
    outputs_def: dict[str, Any] = definition["outputs"]
    if set(inputs_def) & set(outputs_def):
        raise Refused("definition.json: input and output names overlap")
    entry = definition.get("custom_inputs_entrypoint") or None
    source = _reference_source(folder, definition, notes)
    _check_reference(source, list(inputs_def), entry)
    unknown = sorted(set(definition) - KNOWN_FIELDS)
    if unknown:
        notes.append(f"definition fields not read: {', '.join(unknown)}")

    tensor_inputs = [key for key, spec in inputs_def.items() if spec.get("shape") is not None]
    scalar_inputs = [key for key, spec in inputs_def.items() if spec.get("shape") is None]
    inputs = [_tensor("input", key, inputs_def[key], definition["axes"]) for key in tensor_inputs]
    outputs = []
    for key, spec in outputs_def.items():
        if spec.get("shape") is None:
            notes.append(f"output {key!r} is a Python scalar upstream: here a 0-d tensor")
            spec = {**spec, "shape": []}
        outputs.append(_tensor("output", key, spec, definition["axes"]))
    for key in scalar_inputs:
        check_dtype(f"scalar input {key!r}", str(inputs_def[key].get("dtype")))

    # Workloads: resolve axes, keep those every part of SOLboard can express.
    constraints = [str(item) for item in definition.get("constraints") or []]
    records = []
    unchecked: set[str] = set()
    for workload in _workloads(folder, dropped):
        uuid = workload["uuid"]
        try:
            values = _resolve(workload, const, var, expr, constraints, unchecked)
        except ValueError as error:
            dropped.append(f"workload {uuid}: {error}")
            continue
        given = workload.get("inputs") or {}
        kinds: dict[str, str] = {}
        scalars: dict[str, Any] = {}
        problem = None
        for key in inputs_def:
            descriptor = given.get(key) or {"type": "random"}
            kind = descriptor.get("type", "random")
            if key in scalar_inputs:
                if kind != "scalar" or "value" not in descriptor:
                    problem = f"scalar input {key!r} is {kind!r}: only fixed scalar values convert"
                    break
                scalars[key] = descriptor["value"]
            elif kind in ("random", "custom"):
                kinds[key] = kind
            elif kind == "safetensors":
                problem = f"input {key!r} comes from a safetensors file, which is not carried over"
                break
            else:
                problem = f"input {key!r} has source {kind!r}"
                break
        if problem is None and "custom" in kinds.values() and not entry:
            problem = "custom inputs but no custom_inputs_entrypoint"
        if problem is not None:
            dropped.append(f"workload {uuid}: {problem}")
            continue
        tolerance = {**DEFAULT_TOLERANCE, **(workload.get("tolerance") or {})}
        records.append({"uuid": uuid, "axes": values, "kinds": kinds, "scalars": scalars, "tolerance": tolerance})
    notes += [f"constraint {item!r} is not on axes alone: not checked" for item in sorted(unchecked)]
    if not records:
        raise Refused("no workload could be converted" + (f" ({dropped[-1]})" if dropped else ""))

    def keep(label: str, key: str, reason: str, show: Any = str) -> None:
        """Keep the workloads whose ``key`` has the most common value; report the others."""
        nonlocal records
        chosen = majority([record[key] for record in records])
        for record in records:
            if record[key] != chosen:
                dropped.append(f"workload {record['uuid']}: {label} {show(record[key])} {reason} "
                               f"({show(chosen)} kept)")
        records = [record for record in records if record[key] == chosen]

    def sources(kinds: dict[str, str]) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in kinds.items())

    def tolerance_text(tolerance: dict[str, Any]) -> str:
        text = (f"atol {tolerance['max_atol']:g}, rtol {tolerance['max_rtol']:g}, "
                f"matched {tolerance['required_matched_ratio']:g}")
        if tolerance.get("max_error_cap") is not None:
            text += f", cap {tolerance['max_error_cap']:g}"
        return text + (", -inf allowed" if tolerance.get("allow_negative_inf") else "")

    keep("input sources", "kinds", "differ from the other workloads'", sources)
    keep("tolerance", "tolerance", "differs: SOLboard has one tolerance per problem", tolerance_text)

    # Scalar inputs: integers and booleans become axes passed as keyword ints; a float is fixed.
    parameters: list[dict[str, Any]] = []
    scalar_args: list[str] = []
    for key, spec in inputs_def.items():
        if key not in scalar_inputs:
            parameters.append({"name": key, "kind": "tensor", "source": records[0]["kinds"][key],
                               "description": spec.get("description")})
            continue
        given_values = [record["scalars"][key] for record in records]
        if all(isinstance(value, bool) for value in given_values) or all(
            isinstance(value, int) and not isinstance(value, bool) for value in given_values
        ):
            kind = "bool" if isinstance(given_values[0], bool) else "int"
            parameters.append({"name": key, "kind": "axis", "axis": key, "type": kind})
            scalar_args.append(key)
            axis_names.append(key)
            for record in records:
                record["axes"][key] = int(record["scalars"][key])
            notes.append(f"scalar input {key!r} ({kind}) is an axis, passed to the kernel as the keyword {key}=...")
            continue
        chosen = majority(given_values)
        for record in list(records):
            if record["scalars"][key] != chosen:
                dropped.append(f"workload {record['uuid']}: scalar {key} = {record['scalars'][key]!r} (only "
                               f"{key} = {chosen!r} kept: a kernel receives no float scalars)")
                records.remove(record)
        parameters.append({"name": key, "kind": "fixed", "value": chosen})
        notes.append(f"scalar input {key!r} is fixed at {chosen!r}: the kernel does not receive it")
    check_axis_names(scalar_args)

    shapes: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for record in records:
        ident = shape_id({axis: record["axes"][axis] for axis in axis_names})
        if ident in seen:
            dropped.append(f"workload {record['uuid']}: same shape as workload {seen[ident]}")
            continue
        seen[ident] = record["uuid"]
        shapes.append({**{axis: record["axes"][axis] for axis in axis_names}, "ranked": True})

    tolerance = records[0]["tolerance"]
    if tolerance.get("max_error_cap") is not None:
        dropped.append(f"tolerance max_error_cap {tolerance['max_error_cap']}: SOLboard has no error cap")
    if not tolerance.get("allow_negative_inf"):
        notes.append("SOLboard accepts an output of -inf (or +inf, NaN) where the reference has the same value; "
                     "SOL-ExecBench without allow_negative_inf fails any non-finite value")

    counts_path = folder / "counts.py"
    counts_source = counts_path.read_text() if counts_path.is_file() else None
    if counts_source is None:
        dropped.append("ranking: counts missing: not rankable (SOL-ExecBench gives no flop or byte counts; "
                       "every shape is unranked)")
        for shape in shapes:
            shape["ranked"] = False
    rewritten, replaced = rewrite_devices(source)
    if replaced:
        notes.append(f"{replaced} device literal(s) of the reference now follow the device of each call")

    description = _description(definition, inputs_def, outputs_def, parameters, counts_source is not None)
    candidate = Candidate(
        source=folder,
        format=FORMAT,
        upstream_name=upstream,
        name=name,
        title=f"{upstream} (SOL-ExecBench)"[:200],
        description=description,
        axes=axis_names,
        inputs=inputs,
        outputs=outputs,
        tolerance={"atol": tolerance["max_atol"], "rtol": tolerance["max_rtol"],
                   "matched_ratio": tolerance["required_matched_ratio"]},
        shapes=shapes,
        baseline="the SOL-ExecBench reference run(), its results copied into the outputs",
        adapter={"format": FORMAT, "upstream": UPSTREAM_REFERENCE, "op_type": definition.get("op_type"),
                 "custom_entrypoint": entry, "parameters": parameters, "outputs": list(outputs_def)},
        files={UPSTREAM_REFERENCE: rewritten},
        counts_source=counts_source,
        scalar_args=scalar_args,
        dropped=dropped,
        notes=notes,
        source_digest=digest_files(
            [folder / "definition.json", folder / "workload.jsonl", folder / "reference.py", counts_path]
        ),
    )
    flag_shapes(candidate)
    return candidate


def _description(definition: dict[str, Any], inputs: dict[str, Any], outputs: dict[str, Any],
                 parameters: list[dict[str, Any]], rankable: bool) -> str:
    lines = [str(definition.get("description") or definition["name"]).strip(), ""]
    origin = f"Imported from SOL-ExecBench definition {definition['name']}"
    extras = [f"op_type {definition['op_type']}"] if definition.get("op_type") else []
    extras += [f"from {definition['hf_id']}"] if definition.get("hf_id") else []
    lines.append(origin + (f" ({', '.join(extras)})" if extras else "") + ".")
    for title, specs in (("Inputs", inputs), ("Outputs", outputs)):
        described = [f"{key}: {spec['description']}" for key, spec in specs.items() if spec.get("description")]
        if described:
            lines.append(f"{title}: " + "; ".join(described) + ".")
    fixed = [f"{item['name']} = {item['value']!r}" for item in parameters if item["kind"] == "fixed"]
    if fixed:
        lines.append("Fixed scalars (not passed to the kernel): " + ", ".join(fixed) + ".")
    if not rankable:
        lines.append("Counts missing: not rankable (every shape is unranked).")
    return "\n".join(lines)
