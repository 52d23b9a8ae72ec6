"""GPU MODE reference-kernels tasks (github.com/gpu-mode/reference-kernels) in SOLboard's format.

A task is a folder ``problems/<set>/<task>/`` with ``task.yml`` (files, lang, description, tests and
benchmarks: lists of keyword arguments of ``generate_input``, each with a seed), ``reference.py``
(``generate_input(**spec) -> data``, ``ref_kernel(data) -> output``, ``check_implementation``),
``task.py`` (the ``input_t``/``output_t`` type names) and helpers such as the set's ``utils.py``.

Nothing in a task declares its tensors: the converter runs ``generate_input`` and ``ref_kernel`` on
every test and benchmark spec under torch's fake tensors (shapes and dtypes, no memory), infers how
each dimension follows the spec's integer parameters, and runs the smallest spec for real on the
CPU to tell inputs from output buffers (a data item the reference returns, writes, or never reads
and that matches a result in shape). docs/importing.md lists what each field becomes.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from evaluator.importers.common import (
    Candidate,
    Refused,
    check_axis_names,
    check_dtype,
    declared_bytes,
    digest_files,
    flag_shapes,
    folders_with,
    identifier,
    majority,
    problem_name,
    rewrite_devices,
    shape_id,
    unique,
)

FORMAT = "reference-kernels"
UPSTREAM = "upstream"
#: match_reference's defaults in the reference-kernels utils.
DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-8
#: task.yml fields: read, or knowingly not carried over (with the reason the report gives).
NOT_CARRIED = {
    "config": "the task's eval.py is replaced by SOLboard's harness",
    "templates": "submission templates are not carried over (the contract is SOLboard's kernel(*inputs, *outputs))",
    "test_timeout": "SOLboard's stage limits apply",
    "benchmark_timeout": "SOLboard's stage limits apply",
    "ranked_timeout": "SOLboard's stage limits apply",
    "ranking_by": "SOLboard ranks by the geometric mean of per-shape scores",
    "gpus": "the GPU types come from SOLboard's runners",
}
READ = {"files", "lang", "description", "tests", "benchmarks", "multi_gpu"}
SKIPPED_FILES = {"eval.py", "submission.py"}
MISSING = object()


def discover(root: Path) -> list[Path]:
    return folders_with(root, "task.yml")


def _task(folder: Path) -> dict[str, Any]:
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
        raise Refused("multi-GPU task: not converted (SOLboard's multi-GPU contract differs, docs/multigpu.md)")
    return task


def _files(folder: Path, task: dict[str, Any]) -> dict[str, Path]:
    """The task's files by the name the task sees them under (what task.yml's ``files`` maps)."""
    main = str((task.get("config") or {}).get("main", "eval.py")) if isinstance(task.get("config"), dict) else "eval.py"
    entries = task.get("files")
    if not entries:
        entries = [{"name": name, "source": name} for name in ("reference.py", "task.py", "utils.py")]
        if not (folder / "utils.py").exists():
            entries[-1]["source"] = "../utils.py"
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


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _parameters(function: ast.FunctionDef) -> tuple[list[str], set[str], bool]:
    """(parameter names, those without a default, takes **kwargs)."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    names = [arg.arg for arg in positional] + [arg.arg for arg in arguments.kwonlyargs]
    required = {arg.arg for arg in positional[: len(positional) - len(arguments.defaults)]}
    required |= {arg.arg for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is None}
    return names, required, arguments.kwarg is not None


def _constant(node: ast.AST) -> float | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


#: Keywords of a tolerance call that are not the tolerance (match_reference's reference function).
_NOT_TOLERANCE = {"reference", "max_print"}


def _tolerance_of(call: ast.Call, defaults: dict[str, float]) -> dict[str, float] | None:
    """atol/rtol of a make_match_reference / match_reference / allclose call; None when they are
    computed, or when the call passes anything else that could change the check."""
    found = dict(defaults)
    for keyword in call.keywords:
        if keyword.arg in found:
            value = _constant(keyword.value)
            if value is None:
                return None
            found[keyword.arg] = value
        elif keyword.arg is None or keyword.arg not in _NOT_TOLERANCE:
            return None
    return found


def match_defaults(utils_source: str | None) -> dict[str, float]:
    """rtol/atol defaults of ``match_reference`` in the set's utils.py (reference-kernels' own are
    1e-5 and 1e-8)."""
    found = {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    if not utils_source:
        return found
    try:
        function = _functions(ast.parse(utils_source)).get("match_reference")
    except SyntaxError:
        return found
    if function is None:
        return found
    arguments = function.args.posonlyargs + function.args.args
    for arg, default in zip(arguments[len(arguments) - len(function.args.defaults):], function.args.defaults):
        value = _constant(default)
        if arg.arg in found and value is not None:
            found[arg.arg] = value
    return found


def tolerance(tree: ast.Module, defaults: dict[str, float] | None = None) -> tuple[dict[str, float] | None, str]:
    """The tolerance check_implementation applies, read from the source, and how it was read.

    ``check_implementation = make_match_reference(ref_kernel, rtol=..., atol=...)`` and a function
    whose only check is ``match_reference``/``verbose_allclose`` with constant tolerances, or
    ``verbose_allequal`` (exact), are read; anything else is custom code (None)."""
    base = defaults or {"rtol": DEFAULT_RTOL, "atol": DEFAULT_ATOL}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "check_implementation" for target in node.targets
        ):
            if isinstance(node.value, ast.Call) and _call_name(node.value) == "make_match_reference":
                found = _tolerance_of(node.value, base)
                return found, "make_match_reference" if found else "make_match_reference with computed or extra arguments"
            return None, "check_implementation is not a make_match_reference(...)"
        if isinstance(node, ast.FunctionDef) and node.name == "check_implementation":
            calls = [item for item in ast.walk(node) if isinstance(item, ast.Call)]
            names = {_call_name(call) for call in calls}
            checks = [call for call in calls if _call_name(call) in ("match_reference", "verbose_allclose", "allclose")]
            if "verbose_allequal" in names and not checks:
                return {"rtol": 0.0, "atol": 0.0}, "verbose_allequal (exact)"
            if len(checks) == 1:
                found = _tolerance_of(checks[0], base)
                if found:
                    return found, f"{_call_name(checks[0])} in check_implementation"
            return None, "check_implementation is custom code"
    return None, "reference.py has no check_implementation"


def _names_from_reference(tree: ast.Module, count: int) -> list[str | None]:
    """Names of the data items, from ``a, b, c = data`` in ref_kernel or generate_input's return."""
    functions = _functions(tree)
    ref = functions.get("ref_kernel")
    if ref is not None and ref.args.args:
        param = ref.args.args[0].arg
        for node in ast.walk(ref):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and node.value.id == param
                and isinstance(node.targets[0], ast.Tuple)
                and len(node.targets[0].elts) == count
                and all(isinstance(item, ast.Name) for item in node.targets[0].elts)
            ):
                return [item.id for item in node.targets[0].elts if isinstance(item, ast.Name)]
        if count == 1:
            return [param]
    generate = functions.get("generate_input")
    if generate is not None:
        for node in ast.walk(generate):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == count:
                names: list[str | None] = []
                for item in node.value.elts:
                    while isinstance(item, (ast.Call, ast.Attribute)):
                        item = item.func if isinstance(item, ast.Call) else item.value
                    names.append(item.id if isinstance(item, ast.Name) else None)
                return names
    return [None] * count


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
    elif len(args) == 1 and isinstance(args[0], ast.Name) is False and not isinstance(args[0], ast.Constant):
        return None
    dims: list[str | None] = []
    for arg in args:
        dims.append(arg.id if isinstance(arg, ast.Name) else None)
    return dims if any(dims) else None


def dim_hints(tree: ast.Module, count: int) -> list[list[str | None] | None]:
    """For each data item, the parameter names generate_input's source gives its dimensions, when
    the item is a variable made by one tensor factory call (``a = torch.empty(m, k, ...)``)."""
    generate = _functions(tree).get("generate_input")
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
            if len(elements) != count:
                continue
            hints: list[list[str | None] | None] = []
            for element in elements:
                call = _innermost_call(element)
                base = element
                while isinstance(base, (ast.Call, ast.Attribute)):
                    base = base.func if isinstance(base, ast.Call) else base.value
                if isinstance(base, ast.Name) and base.id in made:
                    hints.append(made[base.id])
                elif call is not None:
                    hints.append(_dims_of_call(call))
                else:
                    hints.append(None)
            return hints
    return [None] * count


# ---------------------------------------------------------------- specs


def _specs(task: dict[str, Any], dropped: list[str]) -> list[dict[str, Any]]:
    specs = []
    for section, ranked in (("tests", False), ("benchmarks", True)):
        entries = task.get(section) or []
        if not isinstance(entries, list):
            raise Refused(f"task.yml {section} is not a list")
        for number, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict):
                dropped.append(f"{section} #{number}: {entry!r} is not a mapping")
                continue
            specs.append({"where": f"{section} #{number}", "values": dict(entry), "ranked": ranked})
    if not specs:
        raise Refused("shapes missing: task.yml has no tests and no benchmarks")
    return specs


def _classify(specs: list[dict[str, Any]], dropped: list[str], notes: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(parameters of generate_input, the specs kept): integer and boolean parameters become axes,
    any other value is fixed (specs with another value are dropped)."""
    keys: list[str] = []
    for spec in specs:
        keys += [key for key in spec["values"] if key != "seed" and key not in keys]
    parameters: list[dict[str, Any]] = []
    for key in keys:
        lacking = [spec for spec in specs if key not in spec["values"]]
        for spec in lacking:
            dropped.append(f"{spec['where']}: gives no {key}")
        specs = [spec for spec in specs if key in spec["values"]]
        if not specs:
            raise Refused(f"no test or benchmark gives every parameter (last missing: {key})")
        values = [spec["values"][key] for spec in specs]
        if all(isinstance(value, bool) for value in values):
            parameters.append({"name": key, "kind": "axis", "axis": identifier(key, "axis"), "type": "bool"})
        elif all(isinstance(value, int) and not isinstance(value, bool) for value in values):
            parameters.append({"name": key, "kind": "axis", "axis": identifier(key, "axis"), "type": "int"})
        else:
            chosen = majority(values)
            for spec in list(specs):
                if spec["values"][key] != chosen:
                    dropped.append(f"{spec['where']}: {key} = {spec['values'][key]!r} (only {key} = {chosen!r} "
                                   "kept: SOLboard's axes are integers)")
                    specs.remove(spec)
            parameters.append({"name": key, "kind": "fixed", "value": chosen})
            notes.append(f"parameter {key} is fixed at {chosen!r}")
    check_axis_names(item["axis"] for item in parameters if item["kind"] == "axis")
    return parameters, specs


def _axes_of(spec: dict[str, Any], parameters: list[dict[str, Any]]) -> dict[str, int]:
    return {item["axis"]: int(spec["values"][item["name"]]) for item in parameters if item["kind"] == "axis"}


# ---------------------------------------------------------------- running upstream code


def _structure(value: Any, what: str) -> tuple[str, list[Any]]:
    import torch

    if isinstance(value, torch.Tensor):
        return "tensor", [value]
    if isinstance(value, (tuple, list)):
        for item in value:
            if not isinstance(item, torch.Tensor):
                raise Refused(f"{what} holds a {type(item).__name__}: only tensors (or tuples of them) convert")
        return ("tuple" if isinstance(value, tuple) else "list"), list(value)
    raise Refused(f"{what} is a {type(value).__name__}: only a tensor or a tuple of tensors converts")


def _fake_limit(error: BaseException) -> bool:
    """An error of torch's fake tensors themselves (data-dependent shapes, ops without a fake
    kernel), as opposed to an error of the upstream code."""
    module = type(error).__module__
    return module.startswith(("torch._subclasses", "torch.fx", "torch._guards")) or "FakeTensor" in str(error)


def _same_bytes(a: Any, b: Any) -> bool:
    import torch

    left = a.detach().cpu().contiguous().reshape(-1)
    right = b.detach().cpu().contiguous().reshape(-1)
    if left.element_size() != right.element_size():
        return False
    return bool(torch.equal(left.view(torch.uint8), right.view(torch.uint8)))


def _perturbed(tensor: Any) -> Any:
    import torch

    if tensor.dtype == torch.bool:
        return ~tensor
    if tensor.is_floating_point():
        return (tensor.float() * 2 + 1).to(tensor.dtype)
    return tensor + 1


class _Upstream:
    """The task's generate_input and ref_kernel, loaded from the staging folder."""

    def __init__(self, workdir: Path, parameters: list[dict[str, Any]]) -> None:
        from evaluator.importers.runtime import load_upstream

        try:
            self.module, self.family = load_upstream(workdir, f"{UPSTREAM}/reference.py")
        except Exception as error:  # the upstream code itself fails to import
            raise Refused(f"reference.py does not import: {type(error).__name__}: {error}") from error
        for function in ("generate_input", "ref_kernel"):
            if not callable(getattr(self.module, function, None)):
                raise Refused(f"reference.py defines no {function}()")
        self.parameters = parameters

    def kwargs(self, spec: dict[str, Any], seed: int, takes_seed: bool) -> dict[str, Any]:
        kwargs = {}
        for item in self.parameters:
            value = spec["values"][item["name"]] if item["kind"] == "axis" else item["value"]
            kwargs[item["name"]] = value
        if takes_seed:
            kwargs["seed"] = seed
        return kwargs

    def run(self, kwargs: dict[str, Any], fake: bool) -> tuple[Any, Any]:
        """generate_input then ref_kernel, under fake tensors or for real, on the CPU."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        if not fake:
            data = self.generate(kwargs)
            return data, self.call(data)
        with FakeTensorMode():
            data = self.generate(kwargs)
            return data, self.call(data)

    def generate(self, kwargs: dict[str, Any]) -> Any:
        from evaluator.importers.runtime import on_device

        with on_device(self.family, "cpu", kwargs.get("seed", 1)):
            return self.module.generate_input(**kwargs)

    def call(self, data: Any) -> Any:
        from evaluator.importers.runtime import on_device

        with on_device(self.family, "cpu"):
            return self.module.ref_kernel(data)

    def ref(self, items: list[Any], container: str) -> list[Any]:
        from evaluator.importers.runtime import on_device, rebuild

        with on_device(self.family, "cpu"):
            result = self.module.ref_kernel(rebuild([item.clone() for item in items], container))
        return _structure(result, "ref_kernel's result")[1]


def _infer_dim(
    values: list[tuple[dict[str, int], int]], axis_order: list[str], used: list[str], hint: str | None = None
) -> tuple[str | int, str]:
    """How one tensor dimension follows the axes over the probed shapes: (dimension, note). When
    several axes fit every shape, ``hint`` (the parameter generate_input's source sizes it with)
    decides, else the first axis not used yet by the tensor."""
    sizes = [size for _, size in values]
    matches = [axis for axis in axis_order if all(axes[axis] == size for axes, size in values)]
    if matches:
        if hint in matches:
            return hint, ""
        fresh = [axis for axis in matches if axis not in used]
        chosen = (fresh or matches)[0]
        note = f"matches axes {', '.join(matches)} in every shape; {chosen} chosen" if len(matches) > 1 else ""
        return chosen, note
    if len(set(sizes)) == 1:
        return sizes[0], ""
    for axis in axis_order:
        offsets = {size - axes[axis] for axes, size in values}
        if len(offsets) == 1:
            offset = offsets.pop()
            return f"{axis}{'+' if offset > 0 else '-'}{abs(offset)}", ""
    for axis in axis_order:
        if all(size > 0 and axes[axis] % size == 0 for axes, size in values):
            ratios = {axes[axis] // size for axes, size in values}
            if len(ratios) == 1:
                return f"{axis}/{ratios.pop()}", ""
    for numerator in axis_order:
        for denominator in axis_order:
            if numerator != denominator and all(
                axes[denominator] > 0 and axes[numerator] % axes[denominator] == 0
                and axes[numerator] // axes[denominator] == size
                for axes, size in values
            ):
                return f"{numerator}/{denominator}", ""
    shown = ", ".join(f"{size} at {axes}" for axes, size in values[:4])
    raise Refused(f"a dimension ({shown}) is neither an axis, a constant, AXIS+n, AXIS/n nor AXIS/AXIS")


def convert(folder: Path, workdir: Path, *, prefix: str = "", atol: float | None = None,
            rtol: float | None = None) -> Candidate:
    """One task folder as a candidate (``Refused`` says why it cannot be)."""
    import torch

    dropped: list[str] = []
    notes: list[str] = []
    task = _task(folder)
    files = _files(folder, task)
    upstream_name = f"{folder.parent.name}/{folder.name}"
    name = problem_name(folder.name, prefix)
    for key in task:
        if key in NOT_CARRIED:
            notes.append(f"task.yml {key}: {NOT_CARRIED[key]}")
        elif key not in READ:
            notes.append(f"task.yml {key}: not read")

    # Upstream files, device literals rewritten, into the staging folder.
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
    for relative, text in staged.items():
        (workdir / relative).parent.mkdir(parents=True, exist_ok=True)
        (workdir / relative).write_text(text)
    if replaced:
        notes.append(f"{replaced} device literal(s) (\"cuda\", .cuda()) now follow the device of each call")

    tree = ast.parse(files["reference.py"].read_text())
    functions = _functions(tree)
    if "generate_input" not in functions or "ref_kernel" not in functions:
        raise Refused("reference.py defines no generate_input() or no ref_kernel()")
    accepted, required, open_kwargs = _parameters(functions["generate_input"])
    takes_seed = "seed" in accepted or open_kwargs
    specs = _specs(task, dropped)
    parameters, specs = _classify(specs, dropped, notes)
    unknown = [item["name"] for item in parameters if item["name"] not in accepted and not open_kwargs]
    if unknown:
        raise Refused(f"generate_input{tuple(accepted)} takes no {', '.join(unknown)} (given by task.yml)")
    needed = sorted(required - {item["name"] for item in parameters} - {"seed"})
    if needed:
        raise Refused(f"generate_input needs {', '.join(needed)}, which no test or benchmark gives")
    if any(str(spec["values"].get("seed", "")) for spec in specs):
        notes.append("the seeds of task.yml's tests and benchmarks are not used: SOLboard seeds every call itself")

    found, how = tolerance(tree, match_defaults(staged.get(f"{UPSTREAM}/utils.py")))
    if found is None:
        if atol is None or rtol is None:
            raise Refused(f"tolerance unknown: {how}; give one with --atol and --rtol")
        found = {"atol": atol, "rtol": rtol}
        notes.append(f"tolerance atol {atol:g}, rtol {rtol:g} given on the command line ({how})")
    else:
        notes.append(f"tolerance read from {how}: atol {found['atol']:g}, rtol {found['rtol']:g}")

    upstream = _Upstream(workdir, parameters)
    axis_order = [item["axis"] for item in parameters if item["kind"] == "axis"]
    probes: list[dict[str, Any]] = []
    layout: tuple[str, int] | None = None
    result_layout: tuple[str, int] | None = None
    unprobed: list[str] = []
    for spec in list(specs):
        kwargs = upstream.kwargs(spec, 1, takes_seed)
        try:
            data, result = upstream.run(kwargs, fake=True)
        except Refused:
            raise
        except Exception as error:  # noqa: BLE001 - upstream code fails in any way: reported per spec
            if not _fake_limit(error):
                dropped.append(f"{spec['where']}: generate_input or ref_kernel fails: {type(error).__name__}: {error}")
                specs.remove(spec)
                continue
            if spec["ranked"]:
                unprobed.append(spec["where"])
                continue
            try:
                data, result = upstream.run(kwargs, fake=False)
            except Exception as error_again:  # noqa: BLE001 - reported per spec
                dropped.append(f"{spec['where']}: generate_input or ref_kernel fails: "
                               f"{type(error_again).__name__}: {error_again}")
                specs.remove(spec)
                continue
        container, items = _structure(data, "generate_input's result")
        result_container, results = _structure(result, "ref_kernel's result")
        if layout is None:
            layout, result_layout = (container, len(items)), (result_container, len(results))
        if (container, len(items)) != layout or (result_container, len(results)) != result_layout:
            raise Refused(f"{spec['where']}: generate_input or ref_kernel returns another structure than for the "
                          "other shapes")
        probes.append({"spec": spec, "axes": _axes_of(spec, parameters),
                       "items": [(tuple(item.shape), item.dtype) for item in items],
                       "results": [(tuple(item.shape), item.dtype) for item in results]})
    if not probes or layout is None or result_layout is None:
        raise Refused("no test or benchmark runs" + (f" ({dropped[-1]})" if dropped else ""))
    if unprobed:
        notes.append(f"not probed under fake tensors (their dimensions follow the others): {', '.join(unprobed)}")

    # The smallest probed spec, run for real: which data items are output buffers?
    def size(probe: dict[str, Any]) -> int:
        return sum(int(torch.Size(shape).numel()) * dtype.itemsize for shape, dtype in probe["items"])

    smallest = min(probes, key=size)
    data = upstream.generate(upstream.kwargs(smallest["spec"], 1, takes_seed))
    container, items = _structure(data, "generate_input's result")
    clean = [item.detach().clone() for item in items]  # the data before ref_kernel runs
    _, results = _structure(upstream.call(data), "ref_kernel's result")
    pair: dict[int, int] = {}  # result index -> index of the data item that is its buffer
    why: dict[int, str] = {}  # data item index -> how it was found to be an output buffer
    for j, value in enumerate(results):
        for i, item in enumerate(items):
            if i not in pair.values() and value.untyped_storage().data_ptr() == item.untyped_storage().data_ptr():
                pair[j], why[i] = i, "ref_kernel returns it"
                break
    for i, (item, before) in enumerate(zip(items, clean)):
        if i in pair.values() or _same_bytes(item, before):
            continue
        match = [j for j, value in enumerate(results) if j not in pair and value.numel() == item.numel()]
        if not match:
            raise Refused(f"ref_kernel writes into data item {i} without returning it")
        pair[match[0]], why[i] = i, "ref_kernel writes it"
    reference_results = upstream.ref(clean, container)

    def unused(i: int) -> bool:
        """Changing data item i changes none of ref_kernel's results."""
        trial = list(clean)
        trial[i] = _perturbed(clean[i])
        try:
            changed = upstream.ref(trial, container)
        except Exception:  # noqa: BLE001 - a reference that fails on other values reads the item
            return False
        return all(_same_bytes(a, b) for a, b in zip(changed, reference_results))

    for j, value in enumerate(results):
        if j in pair:
            continue
        # same shape first, then the same number of elements (a result of shape () for a buffer of (1,))
        free = [i for i, item in enumerate(items) if i not in pair.values()]
        candidates = [i for i in free if items[i].shape == value.shape][::-1]
        candidates += [i for i in free if items[i].numel() == value.numel() and i not in candidates][::-1]
        for i in candidates:  # output buffers come last in the data tuples of reference-kernels
            if unused(i):
                pair[j], why[i] = i, "ref_kernel never reads it and it has the size of its result"
                break

    # Names, roles and declared tensors.
    raw_names = _names_from_reference(tree, len(items))
    item_names = unique(
        [identifier(raw or f"input{i}", "input") for i, raw in enumerate(raw_names)], taken=axis_order
    )
    output_names: list[str] = []
    fresh = [j for j in range(len(results)) if j not in pair]
    for j in range(len(results)):
        if j in pair:
            output_names.append(item_names[pair[j]])
        else:
            output_names.append("output" if len(fresh) == 1 else f"output{j}")
    output_names = [output_names[j] if j in pair else unique([output_names[j]], item_names + axis_order)[0]
                    for j in range(len(results))]
    slots = [
        {"role": "output" if i in pair.values() else "input", "name": item_names[i]} for i in range(len(items))
    ]
    for i, slot in enumerate(slots):
        if slot["role"] == "output":
            notes.append(f"data item {i} ({slot['name']}) is an output buffer: {why[i]}")
        elif unused(i):
            notes.append(f"data item {i} ({slot['name']}) does not change the reference's result; it stays an input")

    param_to_axis = {item["name"]: item["axis"] for item in parameters if item["kind"] == "axis"}
    hints = dim_hints(tree, len(items))

    def declare(label: str, index: int, which: str) -> dict[str, Any]:
        item_hints = (hints[index] if which == "items" else None) or []
        values = [(probe["axes"], probe[which][index][0]) for probe in probes]
        dtypes = {probe[which][index][1] for probe in probes}
        if len(dtypes) > 1:
            raise Refused(f"{label}: its dtype changes with the shape ({sorted(map(str, dtypes))})")
        ranks = {len(shape) for _, shape in values}
        if len(ranks) > 1:
            raise Refused(f"{label}: its number of dimensions changes with the shape")
        shape: list[str | int] = []
        for dim in range(ranks.pop()):
            hint = item_hints[dim] if dim < len(item_hints) else None
            try:
                inferred, note = _infer_dim([(axes, shape_[dim]) for axes, shape_ in values], axis_order,
                                            [str(item) for item in shape], param_to_axis.get(hint or ""))
            except Refused as error:
                raise Refused(f"{label} dimension {dim}: {error}") from None
            if note:
                notes.append(f"{label} dimension {dim} {note}")
            shape.append(inferred)
        dtype = str(dtypes.pop()).removeprefix("torch.")
        return {"name": label, "shape": shape, "dtype": dtype}

    inputs = []
    for i, slot in enumerate(slots):
        if slot["role"] == "input":
            spec = declare(slot["name"], i, "items")
            check_dtype(f"input {slot['name']!r}", spec["dtype"])
            inputs.append(spec)
    outputs = []
    for j, out_name in enumerate(output_names):
        if j in pair:  # the kernel writes the buffer: its shape and dtype are the upstream buffer's
            spec = declare(out_name, pair[j], "items")
            sizes = [(probe["results"][j][0], probe["items"][pair[j]][0]) for probe in probes]
            if any(torch.Size(result).numel() != torch.Size(buffer).numel() for result, buffer in sizes):
                raise Refused(f"output {out_name}: the buffer and ref_kernel's result differ in size")
            if any(result != buffer for result, buffer in sizes):
                notes.append(f"output {out_name!r}: ref_kernel's result has shape {sizes[0][0]}, the buffer "
                             f"{sizes[0][1]}: the result is reshaped to the buffer's shape")
            computed = str(probes[0]["results"][j][1]).removeprefix("torch.")
            if computed != spec["dtype"]:
                notes.append(f"output {out_name} is {spec['dtype']} (the buffer); the reference computes {computed}")
        else:
            spec = declare(out_name, j, "results")
        check_dtype(f"output {out_name!r}", spec["dtype"])
        outputs.append(spec)
    if not inputs:
        raise Refused("every data item is an output: the task has no input")

    # Shapes: tests unranked, benchmarks ranked (when counts are given); one per set of axes.
    counts_path = folder / "counts.py"
    counts_source = counts_path.read_text() if counts_path.is_file() else None
    shapes: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for spec in specs:
        axes = _axes_of(spec, parameters)
        ident = shape_id(axes)
        if ident in by_id:
            by_id[ident]["ranked"] |= spec["ranked"]
            continue
        by_id[ident] = {**axes, "ranked": spec["ranked"]}
        shapes.append(by_id[ident])
    if not axis_order:
        raise Refused("generate_input has no integer parameter: SOLboard needs at least one axis")
    if counts_source is None:
        dropped.append("ranking: counts missing: not rankable (reference-kernels gives no flop or byte counts; "
                       "every shape is unranked)")
        for shape in shapes:
            shape["ranked"] = False
    elif not any(shape["ranked"] for shape in shapes):
        notes.append("no benchmarks: every shape is unranked")

    layout_text = ", ".join(f"{slot['name']} ({slot['role']})" for slot in slots)
    description = "\n".join(
        line
        for line in [
            str(task.get("description") or folder.name).strip(),
            "",
            (
                f"Imported from GPU MODE reference-kernels task {upstream_name}. The upstream data tuple is "
                f"({layout_text}); a kernel receives the inputs, then the outputs "
                f"({', '.join(output_names)}), and writes the outputs in place."
            ),
            "" if counts_source is not None else "Counts missing: not rankable (every shape is unranked).",
        ]
    ).strip()
    candidate = Candidate(
        source=folder,
        format=FORMAT,
        upstream_name=upstream_name,
        name=name,
        title=f"{folder.name} (GPU MODE {folder.parent.name})"[:200],
        description=description,
        axes=axis_order,
        inputs=inputs,
        outputs=outputs,
        tolerance={"atol": found["atol"], "rtol": found["rtol"], "matched_ratio": 1.0},
        shapes=shapes,
        baseline="the task's ref_kernel(data), its result copied into the outputs",
        adapter={
            "format": FORMAT,
            "upstream": f"{UPSTREAM}/reference.py",
            "generate": "generate_input",
            "reference": "ref_kernel",
            "parameters": parameters + ([{"name": "seed", "kind": "seed"}] if takes_seed else []),
            "data": {"container": container, "slots": slots},
            "result": {"container": result_layout[0], "outputs": output_names},
        },
        files=staged,
        counts_source=counts_source,
        dropped=dropped,
        notes=list(dict.fromkeys(notes)),
        source_digest=digest_files([folder / "task.yml", *files.values(), counts_path]),
    )
    for shape in candidate.shapes:  # every declared tensor must have a size at every shape
        declared_bytes(candidate.inputs + candidate.outputs, {axis: shape[axis] for axis in axis_order})
    flag_shapes(candidate)
    return candidate
