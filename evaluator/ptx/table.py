"""The check of a problem's ``[ptx]`` table against the problem itself.

A native kernel of a problem can only be validated and launched if its table names what the
problem has: tensors, axes, tensors TMA can describe on every shape, known targets and features.
Native problems and imported ones (evaluator/importers/) are held to the same check; the
catalogue tests run it on every problem. docs/ptx.md section 3 describes the table.
"""

from __future__ import annotations

import math
from typing import Any

from evaluator.ptx.abi import DEFAULT_ARCHS, problem_abi, tensormap_unfit
from evaluator.ptx.archs import ARCHS
from evaluator.ptx.feature_evidence import FEATURES

TABLE_KEYS = ("tensors", "scalars", "tensormaps", "archs", "constants", "required_features")
NATIVE_LANGUAGES = ("ptx", "cuda")


def table_errors(problem: Any) -> list[str]:
    """Everything wrong with the problem's ``[ptx]`` table, one sentence each (empty: fine)."""
    table: dict[str, Any] = dict(problem.ptx or {})
    native = [language for language in problem.languages if language in NATIVE_LANGUAGES]
    if not table:
        return [f"{problem.name} takes {', '.join(native)} but has no [ptx] table"] if native else []
    if problem.kind != "single":
        return [f"{problem.name} is a multi-GPU problem: native kernels are not offered for it"]
    errors = [
        f"unknown key [ptx].{key} (known: {', '.join(TABLE_KEYS)})" for key in table if key not in TABLE_KEYS
    ]
    errors += _name_errors(problem, table)
    errors += _constant_errors(table.get("constants", {}))
    errors += _feature_errors(table.get("required_features", {}), table.get("archs", DEFAULT_ARCHS))
    if not errors:
        errors += _tensormap_errors(problem)
    return [f"{problem.name}: {error}" for error in errors]


def _name_errors(problem: Any, table: dict[str, Any]) -> list[str]:
    tensors = [t.name for t in (*problem.inputs, *problem.outputs)]
    outputs = {t.name for t in problem.outputs}
    allowed = table.get("tensors", tensors)
    errors = [f"[ptx].tensors names {name!r}, which is not a tensor of the problem" for name in allowed
              if name not in tensors]
    errors += [f"[ptx].tensors leaves out the output {name!r}: no kernel could write it" for name in outputs
               if name not in allowed]
    errors += [f"[ptx].scalars names {name!r}, which is not an axis" for name in table.get("scalars", [])
               if name not in problem.axes]
    errors += [f"[ptx].scalars leaves out {name!r}, which Python kernels get as a keyword"
               for name in problem.scalar_args if name not in table.get("scalars", problem.axes)]
    errors += [f"[ptx].tensormaps names {name!r}, which [ptx].tensors does not allow"
               for name in table.get("tensormaps", []) if name not in allowed]
    errors += [
        f"[ptx].archs names {arch!r}; known targets: {', '.join(ARCHS)}"
        for arch in table.get("archs", [])
        if arch not in ARCHS
    ]
    return errors


def _constant_errors(constants: Any) -> list[str]:
    if not isinstance(constants, dict):
        return ["[ptx.constants] must be a table of name = number"]
    return [f"[ptx.constants].{name} must be a finite number and {name!r} a C identifier"
            for name, value in constants.items() if not (name.isidentifier() and _finite_number(value))]


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _feature_errors(required: Any, archs: Any) -> list[str]:
    errors = []
    for arch, features in dict(required).items():
        if arch not in archs:
            errors.append(f"[ptx.required_features] names {arch!r}, a target the problem does not accept")
        errors += [f"[ptx.required_features].{arch} names {feature!r}; known: {', '.join(FEATURES)}"
                   for feature in features if feature not in FEATURES]
    return errors


def _tensormap_errors(problem: Any) -> list[str]:
    """A tensor offered as a TMA descriptor must be describable on every shape, or every kernel
    that takes it would be refused."""
    abi = problem_abi(problem)
    errors = []
    for name in abi.tensormaps:
        for axes in abi.shapes:
            reason = tensormap_unfit(abi.tensors[name], axes)
            if reason:
                where = ", ".join(f"{k}={v}" for k, v in axes.items())
                errors.append(f"[ptx].tensormaps offers {name!r}, but on shape {where}: {reason}")
                break
    return errors


def languages_markdown(problems: list[Any]) -> str:
    """The table of problems by language in docs/ptx.md (a test keeps the two in step)."""
    lines = ["| problem | languages | TMA descriptors | fp32 constants | features track sm_90a | sm_100a |",
             "|---|---|---|---|---|---|"]
    for problem in sorted(problems, key=lambda p: p.name):
        table = dict(problem.ptx or {})
        required = table.get("required_features", {})
        if not any(language in NATIVE_LANGUAGES for language in problem.languages):
            why = "multi-GPU: Python only" if problem.kind == "multi" else "Python only"
            lines.append(f"| `{problem.name}` | {', '.join(problem.languages)} | {why} | | | |")
            continue
        constants = ", ".join(f"{name} = {value:g}" for name, value in table.get("constants", {}).items())
        lines.append(
            f"| `{problem.name}` | {', '.join(problem.languages)} "
            f"| {', '.join(table.get('tensormaps', [])) or '-'} "
            f"| {constants or '-'} | {', '.join(required.get('sm_90a', [])) or '-'} "
            f"| {', '.join(required.get('sm_100a', [])) or '-'} |"
        )
    return "\n".join(lines)
