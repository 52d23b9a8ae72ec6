"""Reading a GPU MODE reference-kernels task without running it: task.yml, its files, its test and
benchmark specs, and what reference.py's source says (the data items' names, the sizes
``generate_input`` gives its tensors, a constant tolerance).

Every check here is cheap (no torch, no upstream code runs), so a task that cannot convert for a
reason visible in its files is refused before anything runs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.importers.common import Refused, check_axis_names, identifier, majority

#: match_reference's defaults in the reference-kernels utils.
DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-8
#: task.yml fields: read, or knowingly not carried over (with the reason the report gives).
NOT_CARRIED = {
    "config": "the task's eval.py is replaced by SOLboard's harness",
    "templates": (
        "submission templates are not carried over (SOLboard accepts the task's custom_kernel(data) as is)"
    ),
    "test_timeout": "SOLboard's stage limits apply",
    "benchmark_timeout": "SOLboard's stage limits apply",
    "ranked_timeout": "SOLboard's stage limits apply",
    "ranking_by": "SOLboard ranks by the geometric mean of per-shape scores",
    "gpus": "the GPU types come from SOLboard's runners",
}
READ = {"files", "lang", "description", "tests", "benchmarks", "multi_gpu"}
SKIPPED_FILES = {"eval.py", "submission.py"}
#: A string parameter of this name (or the only string parameter) selects input distributions.
DISTRIBUTION_NAMES = ("distribution", "dist", "case")


def read_task(folder: Path) -> dict[str, Any]:
    import yaml

    try:
        task = yaml.safe_load((folder / "task.yml").read_text())
    except (OSError, yaml.YAMLError) as error:
        raise Refused(f"task.yml: {error}") from error
    if not isinstance(task, dict):
        raise Refused("task.yml is not a mapping")
    if str(task.get("lang", "py")) != "py":
        raise Refused(f"lang {task.get('lang')!r}: only Python tasks (lang: py) convert")
    if task.get("multi_gpu"):
        raise Refused(
            "multi-GPU task: not converted (SOLboard's multi-GPU contract differs, docs/multigpu.md)"
        )
    return task


def task_files(folder: Path, task: dict[str, Any]) -> dict[str, Path]:
    """The task's files by the name the task sees them under (what task.yml's ``files`` maps)."""
    config = task.get("config")
    main = str(config.get("main", "eval.py")) if isinstance(config, dict) else "eval.py"
    entries = task.get("files") or _default_files(folder)
    files: dict[str, Path] = {}
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            raise Refused(f"task.yml files: {entry!r} is not a name/source pair")
        name, source = str(entry["name"]), str(entry.get("source", entry["name"]))
        if source == "@SUBMISSION@" or name in SKIPPED_FILES or name == main:
            continue
        path = (folder / source).resolve()
        if not path.is_file():
            if name == "reference.py":
                raise Refused(f"missing reference: {source} (the task's reference.py) does not exist")
            if task.get("files"):
                raise Refused(f"file {name} ({source}), listed in task.yml, does not exist")
            continue
        if Path(name).name != name:
            raise Refused(f"file name {name!r} is not a plain file name")
        files[name] = path
    if "reference.py" not in files:
        raise Refused("missing reference: the task has no reference.py")
    return files


def _default_files(folder: Path) -> list[dict[str, str]]:
    entries = [{"name": name, "source": name} for name in ("reference.py", "task.py", "utils.py")]
    if not (folder / "utils.py").exists():
        entries[-1]["source"] = "../utils.py"
    return entries


def carried_notes(task: dict[str, Any]) -> list[str]:
    notes = []
    for key in task:
        if key in NOT_CARRIED:
            notes.append(f"task.yml {key}: {NOT_CARRIED[key]}")
        elif key not in READ:
            notes.append(f"task.yml {key}: not read")
    return notes


# ---------------------------------------------------------------- reference.py's source


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def check_contract(tree: ast.Module) -> None:
    """The reference-kernels contract: ``generate_input(**spec)`` and ``ref_kernel(data)``."""
    defined = functions(tree)
    missing = [name for name in ("generate_input", "ref_kernel") if name not in defined]
    if missing:
        others = ", ".join(sorted(name for name in defined if not name.startswith("_"))) or "none"
        raise Refused(
            f"reference.py defines no {' and no '.join(missing)}(): not the reference-kernels contract "
            f"(generate_input(**spec) -> data, ref_kernel(data) -> output; its functions: {others}); "
            "write the task in that form to import it"
        )


def parameters_of(function: ast.FunctionDef) -> tuple[list[str], set[str], bool]:
    """(parameter names, those without a default, takes **kwargs)."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    names = [arg.arg for arg in positional] + [arg.arg for arg in arguments.kwonlyargs]
    required = {arg.arg for arg in positional[: len(positional) - len(arguments.defaults)]}
    required |= {
        arg.arg
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=False)
        if default is None
    }
    return names, required, arguments.kwarg is not None


def _constant(node: ast.AST) -> float | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def match_defaults(utils_source: str | None) -> dict[str, float]:
    """rtol/atol defaults of ``match_reference`` in the set's utils.py (reference-kernels' own are
    1e-5 and 1e-8)."""
    found = {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    try:
        function = functions(ast.parse(utils_source or "")).get("match_reference")
    except SyntaxError:
        return found
    if function is None:
        return found
    arguments = function.args.posonlyargs + function.args.args
    for arg, default in zip(
        arguments[len(arguments) - len(function.args.defaults) :], function.args.defaults, strict=False
    ):
        value = _constant(default)
        if arg.arg in found and value is not None:
            found[arg.arg] = value
    return found


def declared_tolerance(tree: ast.Module, defaults: dict[str, float]) -> dict[str, float] | None:
    """``check_implementation = make_match_reference(ref_kernel, rtol=..., atol=...)`` with constant
    keywords: its tolerance. Anything else is read by running the check (``rk_probe``)."""
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if not any(
            isinstance(target, ast.Name) and target.id == "check_implementation" for target in node.targets
        ):
            continue
        func = node.value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name != "make_match_reference":
            return None
        found = dict(defaults)
        for keyword in node.value.keywords:
            value = _constant(keyword.value) if keyword.arg in found else None
            if value is None:
                return None
            found[str(keyword.arg)] = value
        return found
    return None


def names_from_source(tree: ast.Module, count: int) -> list[str | None]:
    """Names of the top-level data items, from ``a, b, c = data`` in ref_kernel or from
    generate_input's ``return a, b, c``."""
    defined = functions(tree)
    ref = defined.get("ref_kernel")
    if ref is not None and ref.args.args:
        param = ref.args.args[0].arg
        for node in ast.walk(ref):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == param
                    and isinstance(node.targets[0], ast.Tuple) and len(node.targets[0].elts) == count
                    and all(isinstance(item, ast.Name) for item in node.targets[0].elts)):
                return [item.id for item in node.targets[0].elts if isinstance(item, ast.Name)]
        if count == 1:
            return [param]
    generate = defined.get("generate_input")
    for node in ast.walk(generate) if generate is not None else []:
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Tuple)
            and len(node.value.elts) == count
        ):
            return [_base_name(item) for item in node.value.elts]
    return [None] * count


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Call, ast.Attribute)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _innermost_call(node: ast.AST) -> ast.Call | None:
    """``torch.randn(m, k).contiguous().cuda()`` -> the ``torch.randn(m, k)`` call."""
    found = None
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call):
            found = node
            node = node.func
        else:
            node = node.value
    return found


def _dims_of_call(call: ast.Call) -> list[str | None] | None:
    """The sizes a tensor factory was given: ``torch.empty(m, k)`` or ``torch.randint(0, 9, (n,))``."""
    args = list(call.args)
    if args and isinstance(args[-1], (ast.Tuple, ast.List)):
        args = list(args[-1].elts)
    elif len(args) == 1 and not isinstance(args[0], (ast.Name, ast.Constant)):
        return None
    dims = [arg.id if isinstance(arg, ast.Name) else None for arg in args]
    return dims if any(dims) else None


def dim_hints(tree: ast.Module, count: int) -> list[list[str | None] | None]:
    """For each top-level data item, the parameter names generate_input's source gives its
    dimensions, when the item is made by one tensor factory call (``a = torch.empty(m, k, ...)``)."""
    generate = functions(tree).get("generate_input")
    if generate is None:
        return [None] * count
    made: dict[str, list[str | None]] = {}
    for node in ast.walk(generate):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            call = _innermost_call(node.value)
            dims = _dims_of_call(call) if call is not None else None
            if dims:
                made[node.targets[0].id] = dims
    for node in ast.walk(generate):
        if isinstance(node, ast.Return) and node.value is not None:
            elements = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if len(elements) == count:
                return [_hint(element, made) for element in elements]
    return [None] * count


def _hint(element: ast.AST, made: dict[str, list[str | None]]) -> list[str | None] | None:
    base = _base_name(element)
    if base in made:
        return made[base]
    call = _innermost_call(element)
    return _dims_of_call(call) if call is not None else None


# ---------------------------------------------------------------- specs and parameters


@dataclass
class Spec:
    where: str
    values: dict[str, Any]
    ranked: bool


@dataclass
class Parameters:
    """What generate_input's parameters become: axes, fixed values, the distribution selector."""

    items: list[dict[str, Any]] = field(default_factory=list)
    distribution_parameter: str | None = None
    distributions: list[str] = field(default_factory=list)

    @property
    def axes(self) -> list[str]:
        return [item["axis"] for item in self.items if item["kind"] == "axis"]

    def axes_of(self, spec: Spec) -> dict[str, int]:
        return {item["axis"]: int(spec.values[item["name"]]) for item in self.items if item["kind"] == "axis"}

    def distribution_of(self, spec: Spec) -> str:
        if self.distribution_parameter is None:
            return self.distributions[0]
        return distribution_name(spec.values[self.distribution_parameter])


def distribution_name(value: Any) -> str:
    return re.sub(r"\W+", "_", str(value)).strip("_").lower() or "default"


def read_specs(task: dict[str, Any], dropped: list[str]) -> list[Spec]:
    specs = []
    for section, ranked in (("tests", False), ("benchmarks", True)):
        entries = task.get(section) or []
        if not isinstance(entries, list):
            raise Refused(f"task.yml {section} is not a list")
        for number, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict):
                dropped.append(f"{section} #{number}: {entry!r} is not a mapping")
                continue
            specs.append(Spec(f"{section} #{number}", dict(entry), ranked))
    if not specs:
        raise Refused("shapes missing: task.yml has no tests and no benchmarks")
    return specs


def classify(specs: list[Spec], dropped: list[str], notes: list[str]) -> tuple[Parameters, list[Spec]]:
    """Integer and boolean parameters become axes; one string parameter that selects the data
    (``distribution``) becomes the input distributions; any other value is fixed at its most
    common value (specs with another are dropped)."""
    keys: list[str] = []
    for spec in specs:
        keys += [key for key in spec.values if key != "seed" and key not in keys]
    parameters = Parameters()
    strings = [key for key in keys if all(isinstance(spec.values.get(key, ""), str) for spec in specs)]
    selector = next(
        (key for key in strings if key in DISTRIBUTION_NAMES), strings[0] if len(strings) == 1 else None
    )
    for key in keys:
        specs = _with_key(specs, key, dropped)
        values = [spec.values[key] for spec in specs]
        if key == selector:
            parameters.distribution_parameter = key
            parameters.distributions = list(dict.fromkeys(distribution_name(value) for value in values))
            notes.append(
                f"parameter {key} selects the input distribution: {', '.join(parameters.distributions)}"
            )
        elif all(isinstance(value, bool) for value in values):
            parameters.items.append(
                {"name": key, "kind": "axis", "axis": identifier(key, "axis"), "type": "bool"}
            )
        elif all(isinstance(value, int) and not isinstance(value, bool) for value in values):
            parameters.items.append(
                {"name": key, "kind": "axis", "axis": identifier(key, "axis"), "type": "int"}
            )
        else:
            specs = _fix(parameters, key, specs, dropped, notes)
    if not parameters.distributions:
        parameters.distributions = ["upstream"]
    check_axis_names(parameters.axes)
    return parameters, specs


def _with_key(specs: list[Spec], key: str, dropped: list[str]) -> list[Spec]:
    dropped += [f"{spec.where}: gives no {key}" for spec in specs if key not in spec.values]
    kept = [spec for spec in specs if key in spec.values]
    if not kept:
        raise Refused(f"no test or benchmark gives every parameter (last missing: {key})")
    return kept


def _fix(
    parameters: Parameters, key: str, specs: list[Spec], dropped: list[str], notes: list[str]
) -> list[Spec]:
    chosen = majority([spec.values[key] for spec in specs])
    for spec in specs:
        if spec.values[key] != chosen:
            dropped.append(
                f"{spec.where}: {key} = {spec.values[key]!r} (only {key} = {chosen!r} kept: SOLboard's "
                "axes are integers)"
            )
    parameters.items.append({"name": key, "kind": "fixed", "value": chosen})
    notes.append(f"parameter {key} is fixed at {chosen!r}")
    return [spec for spec in specs if spec.values[key] == chosen]
