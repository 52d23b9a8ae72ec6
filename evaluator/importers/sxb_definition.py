"""Reading a SOL-ExecBench problem folder without running it: definition.json, the reference
source (inline or reference.py: the same definition either way), the axes, the declared tensors,
and each workload's axes, input sources and tolerance.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from evaluator.importers.common import Refused, check_axis_names, check_dtype
from evaluator.problems.dims import evaluate

#: Workload tolerance defaults (SOL-ExecBench's ToleranceSpec).
DEFAULT_TOLERANCE = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99,
                     "max_error_cap": None, "allow_negative_inf": False}
#: Spellings of the tolerance fields found in published workloads, and the one SOLboard reads.
TOLERANCE_ALIASES = {"required_match_ratio": "required_matched_ratio", "atol": "max_atol", "rtol": "max_rtol"}


def workload_tolerance(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload's tolerance with SOL-ExecBench's defaults filled in (both spellings read)."""
    given = {
        TOLERANCE_ALIASES.get(key, key): value for key, value in (workload.get("tolerance") or {}).items()
    }
    return {**DEFAULT_TOLERANCE, **given}


def read_definition(folder: Path) -> dict[str, Any]:
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


def reference_source(folder: Path, definition: dict[str, Any], notes: list[str]) -> str:
    inline = definition.get("reference")
    path = folder / "reference.py"
    on_disk = path.read_text() if path.is_file() else None
    if not inline and not on_disk:
        raise Refused("missing reference: definition.json has no reference and there is no reference.py")
    if inline and on_disk is not None and on_disk.strip() != str(inline).strip():
        notes.append("reference.py differs from definition.json's reference: the definition's is used")
    return str(inline or on_disk).strip() + "\n"


def check_reference(source: str, inputs: list[str], entry: str | None) -> None:
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


def read_axes(definition: dict[str, Any]) -> tuple[dict[str, int], list[str], dict[str, str]]:
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


def tensor(where: str, name: str, spec: dict[str, Any], axes: dict[str, Any]) -> dict[str, Any]:
    shape: list[str | int] = []
    for dim in spec["shape"]:
        if isinstance(dim, int) or (isinstance(dim, str) and dim.isdigit()):
            shape.append(int(dim))
        elif dim in axes:
            shape.append(dim)
        else:
            raise Refused(f"{where} {name!r}: dimension {dim!r} is not an axis")
    return {"name": name, "shape": shape, "dtype": check_dtype(f"{where} {name!r}", str(spec.get("dtype")))}


def read_workloads(folder: Path, dropped: list[str]) -> list[dict[str, Any]]:
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


def resolve(
    workload: dict[str, Any],
    const: dict[str, int],
    var: list[str],
    expr: dict[str, str],
    constraints: list[str],
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


