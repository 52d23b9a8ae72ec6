"""Imports keep what the source says: per-workload tolerances, tolerances a check computes, short
stable shape ids, the meaning rather than the files, distinct names for tasks of one name in two
sets, the dtypes and sizes that can be expressed (and actionable refusals for the rest), and where
the source came from (docs/importing.md).

Modules: `evaluator/importers/naming.py`, `evaluator/importers/provenance.py`,
`evaluator/importers/layout.py`, `evaluator/importers/sxb_definition.py`,
`evaluator/importers/sxb_inputs.py`, `evaluator/importers/sxb_cpu_shape.py`,
`evaluator/importers/rk_probe.py`, `evaluator/importers/rk_declare.py`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from evaluator.importers import import_problems
from evaluator.problems import load_problem
from tests.evaluator.import_sources import rk_task, run_module, sxb_definition, workload

SCALE = """
import torch

def run(x):
    return x * 2
"""


def scale_rows(folder: Path, **changes: Any) -> Path:
    tolerances = changes.pop("tolerances", [None, None, None])
    rows = changes.pop("rows", [8, 16, 32])
    arguments: dict[str, Any] = {
        "name": "scale_rows",
        "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 64}},
        "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
        "reference": SCALE,
        "workloads": [
            workload(f"w{n}", {"rows": n}, tolerance=tol) for n, tol in zip(rows, tolerances, strict=True)
        ],
    }
    arguments.update(changes)
    return sxb_definition(folder, **arguments)


def only(report: Any) -> Any:
    (item,) = report.problems
    return item


def test_every_workload_keeps_its_own_tolerance(tmp_path: Path) -> None:
    loose, strict = (
        {"max_atol": 0.5, "max_rtol": 0.25, "required_match_ratio": 0.95},
        {"max_atol": 1e-3, "max_rtol": 2e-3},
    )
    folder = scale_rows(tmp_path / "src" / "scale", tolerances=[strict, loose, loose])
    item = only(import_problems("sol-execbench", folder, tmp_path / "out"))
    assert item.status == "converted" and item.shapes == 3, (item.reason, item.dropped)
    problem = load_problem(tmp_path / "out" / "scale_rows")
    # the most common tolerance is the problem's; the workload with another keeps its own
    # (``required_match_ratio``, a spelling in published workloads, is read as the matched ratio)
    assert (problem.atol, problem.rtol, problem.matched_ratio) == (0.5, 0.25, 0.95)
    by_rows = {shape.axes["rows"]: problem.tolerance_for("y", dict(shape.axes)) for shape in problem.shapes}
    assert (by_rows[8].atol, by_rows[8].rtol, by_rows[8].matched_ratio) == (1e-3, 2e-3, 0.99)
    assert (by_rows[16].atol, by_rows[32].atol) == (0.5, 0.5)


def test_shape_ids_are_short_and_stable_whatever_the_axes(tmp_path: Path) -> None:
    constants = {
        f"a_rather_long_constant_axis_name_number_{i}": {"type": "const", "value": 1} for i in range(8)
    }
    axes = {"num_tokens_in_the_batch": {"type": "var"}, **constants}
    folder = sxb_definition(
        tmp_path / "src" / "wide", name="wide_axes", axes=axes,
        inputs={"x": {"shape": ["num_tokens_in_the_batch", *constants], "dtype": "float32"}},
        outputs={"y": {"shape": ["num_tokens_in_the_batch", *constants], "dtype": "float32"}},
        reference=SCALE, workloads=[workload(f"w{n}", {"num_tokens_in_the_batch": n}) for n in (3, 5)],
    )
    item = only(import_problems("sol-execbench", folder, tmp_path / "out"))
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "wide_axes")
    assert [shape.shape_id for shape in problem.shapes] == [
        "num_tokens_in_the_batch3",
        "num_tokens_in_the_batch5",
    ]


def test_the_same_definition_with_its_reference_in_a_file_is_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert only(import_problems("sol-execbench", scale_rows(tmp_path / "inline"), out)).status == "converted"
    again = only(import_problems("sol-execbench", scale_rows(tmp_path / "file", inline=False), out))
    assert again.status == "unchanged", again.reason
    changed = only(import_problems("sol-execbench", scale_rows(tmp_path / "changed", rows=[8, 16, 48]), out))
    assert changed.status == "refused" and "--replace" in str(changed.reason)


def test_the_source_is_its_repository_and_path_never_a_local_path(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    folder = scale_rows(checkout / "problems" / "scale")
    for command in (["init", "-q"], ["remote", "add", "origin", "https://github.com/example/kernels.git"],
                    ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(checkout), *command], check=True, capture_output=True)
    item = only(import_problems("sol-execbench", checkout, tmp_path / "out"))
    assert item.source.startswith("github.com/example/kernels:problems/scale@"), item.source
    recorded = load_problem(tmp_path / "out" / "scale_rows").imported["source"]
    assert recorded == item.source and str(tmp_path) not in recorded
    outside = only(import_problems("sol-execbench", folder.parent, tmp_path / "out2", source_repo="mirror/x"))
    assert outside.source.startswith("mirror/x:problems/scale"), outside.source


def test_boolean_scalars_become_keyword_axes(tmp_path: Path) -> None:
    folder = scale_rows(
        tmp_path / "src" / "masked",
        name="masked_rows",
        inputs={
            "x": {"shape": ["rows", "cols"], "dtype": "float32"},
            "negate": {"shape": None, "dtype": "bool"},
        },
        reference="import torch\n\ndef run(x, negate):\n    return -x if negate else x\n",
        workloads=[
            workload(f"w{n}", {"rows": n}, {"negate": {"type": "scalar", "value": n > 8}}) for n in (8, 16)
        ],
    )
    item = only(import_problems("sol-execbench", folder, tmp_path / "out"))
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "masked_rows")
    assert problem.scalar_args == ("negate",) and [s.axes["negate"] for s in problem.shapes] == [0, 1]


# ---------------------------------------------------------------- reference-kernels

ADD = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    a, b = data
    return a + b

def generate_input(size, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return (torch.randn(size, device="cuda", generator=gen), torch.randn(size, device="cuda", generator=gen))

check_implementation = make_match_reference(ref_kernel)
"""


def test_tasks_of_one_name_in_two_sets_get_distinct_names(tmp_path: Path) -> None:
    for family in ("pmpp", "pmpp_v2"):
        rk_task(tmp_path / "problems" / family, "vadd_py", reference=ADD, tests=[{"size": 64, "seed": 1}])
    report = import_problems("reference-kernels", tmp_path / "problems", tmp_path / "out")
    assert [(item.status, item.name) for item in report.problems] == [
        ("converted", "pmpp_vadd_py"),
        ("converted", "pmpp_v2_vadd_py"),
    ], [item.reason for item in report.problems]


TWO_OUTPUTS = """
import torch
from utils import verbose_allclose

def ref_kernel(data):
    x, = data
    return torch.tanh(x), x.abs().amax(dim=-1)

def generate_input(rows, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return (torch.randn(rows, 32, device="cuda", generator=gen),)

def check_implementation(data, output):
    expected_y, expected_s = ref_kernel(data)
    got_y, got_s = output
    reasons = verbose_allclose(got_y, expected_y, rtol=1e-3, atol=2e-3)
    reasons += verbose_allclose(got_s, expected_s, rtol=0.0, atol=1e-6)
    return not reasons, " ".join(reasons)
"""


def test_verbose_allclose_calls_with_constant_tolerances_are_each_outputs_tolerance(tmp_path: Path) -> None:
    task = rk_task(tmp_path / "problems" / "helion", "tanh_py", reference=TWO_OUTPUTS,
                   tests=[{"rows": 4, "seed": 1}, {"rows": 9, "seed": 2}])
    item = only(import_problems("reference-kernels", task, tmp_path / "out"))
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "helion_tanh_py")
    first, second = (problem.tolerance_for(spec.name) for spec in problem.outputs)
    assert {(first.rtol, first.atol), (second.rtol, second.atol)} == {(1e-3, 2e-3), (0.0, 1e-6)}


CONV = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    x, w, out = data
    out[...] = torch.nn.functional.conv1d(x[None, None], w[None, None])[0, 0]
    return out

def generate_input(size, k, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(size, device="cuda", generator=gen)
    w = torch.randn(k, device="cuda", generator=gen)
    return x, w, torch.empty(size - k + 1, device="cuda")

check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
"""


def test_an_output_of_size_minus_k_plus_one_converts(tmp_path: Path) -> None:
    task = rk_task(
        tmp_path / "problems" / "pmpp",
        "conv1d_py",
        reference=CONV,
        tests=[
            {"size": 32, "k": 3, "seed": 1},
            {"size": 64, "k": 5, "seed": 2},
            {"size": 33, "k": 4, "seed": 3},
        ],
    )
    item = only(import_problems("reference-kernels", task, tmp_path / "out"))
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "pmpp_conv1d_py")
    assert [(spec.name, spec.shape) for spec in problem.outputs] == [("out", ("size - k + 1",))]
    assert problem.outputs[0].concrete_shape({"size": 33, "k": 4}) == (30,)


FNUZ = ADD.replace("torch.randn(size, device=\"cuda\", generator=gen), torch.randn",
                   "torch.randn(size, device=\"cuda\", generator=gen).to(torch.float8_e4m3fnuz), torch.randn")


@pytest.mark.parametrize(("reference", "reason"), [
    (FNUZ, "AMD-only"),
    (ADD.replace("def generate_input", "def make_input"), "not the reference-kernels contract"),
    (ADD.replace("import torch", "import torch\nimport aiter"), "an AMD ROCm package"),
])
def test_what_cannot_be_expressed_is_refused_with_a_reason_to_act_on(
    tmp_path: Path, reference: str, reason: str
) -> None:
    task = rk_task(
        tmp_path / "problems" / "amd", "task_py", reference=reference, tests=[{"size": 64, "seed": 1}]
    )
    item = only(import_problems("reference-kernels", task, tmp_path / "out"))
    assert item.status == "refused" and reason in str(item.reason), item.reason


PROBLEM_TOML = '''
name = "catalogue_forms"
title = "t"
version = 1
description = "d"
axes = ["size", "k"]
baseline = "b"
distributions = ["upstream"]

[[inputs]]
name = "x"
shape = ["size"]
dtype = "uint8"

[[outputs]]
name = "y"
shape = ["size - k + 1"]
dtype = "bool"

[tolerance]
atol = 0.0
rtol = 0.0
matched_ratio = 0.99

[[shapes]]
id = "small"
size = 8
k = 3
cpu = true
tolerance = {atol = 0.5, matched_ratio = 0.95}

[[shapes]]
size = 16
k = 3
'''


def test_the_catalogue_reads_shape_ids_shape_tolerances_new_dtypes_and_dimension_expressions(
    tmp_path: Path,
) -> None:
    from evaluator.harness.correctness import outputs_pass

    folder = tmp_path / "catalogue_forms"
    folder.mkdir()
    (folder / "problem.toml").write_text(PROBLEM_TOML)
    problem = load_problem(folder)
    small, large = problem.shapes
    assert (small.shape_id, large.shape_id) == ("small", "size16_k3")
    assert problem.outputs[0].concrete_shape(dict(large.axes)) == (14,)
    assert (problem.inputs[0].dtype, problem.outputs[0].dtype) == ("uint8", "bool")
    own = problem.tolerance_for("y", dict(small.axes))
    assert (own.atol, own.rtol, own.matched_ratio) == (0.5, 0.0, 0.95)
    assert problem.tolerance_for("y", dict(large.axes)).matched_ratio == 0.99
    errors = {"y": {"nonfinite_count": 0, "matched_ratio": 0.96}}
    assert outputs_pass(errors, problem, dict(small.axes)) and not outputs_pass(
        errors, problem, dict(large.axes)
    )


FIXED_PROJECTION = """
import torch

def run(x, w):
    # the model's hidden size is written into the code, as dataset references often do
    return x @ w.reshape(12288, 12288).t()
"""


def test_a_reference_too_big_for_the_cpu_at_every_shape_converts_marked_as_needing_a_gpu(
    tmp_path: Path,
) -> None:
    # a 12288 x 12288 fp32 weight (604 MB) at every workload, and a reference that fixes that size
    folder = sxb_definition(
        tmp_path / "src" / "big_proj", name="big_proj", reference=FIXED_PROJECTION,
        axes={"tokens": {"type": "var"}, "hidden": {"type": "const", "value": 12288}},
        inputs={"x": {"shape": ["tokens", "hidden"], "dtype": "float32"},
                "w": {"shape": ["hidden", "hidden"], "dtype": "float32"}},
        outputs={"y": {"shape": ["tokens", "hidden"], "dtype": "float32"}},
        workloads=[workload("t16", {"tokens": 16}), workload("t64", {"tokens": 64})])
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out").problems
    assert item.status == "converted" and item.rankable, (item.reason, item.dropped)
    problem = load_problem(tmp_path / "out" / "big_proj")
    assert not any(shape.cpu for shape in problem.shapes) and problem.ranked_shapes == problem.shapes
    assert "MiB" in problem.imported["gpu_only"] and "Needs a GPU" in problem.description
    assert problem.counts({"tokens": 16, "hidden": 12288}).flops == {"tf32_tensor": 2 * 16 * 12288 * 12288}
    assert any("needs a GPU" in note for note in item.notes), item.notes
    # the CPU development device refuses its jobs rather than running no shape
    submission = tmp_path / "kernel.py"
    submission.write_text("def kernel(x, w, y):\n    y.copy_(x @ w.t())\n")
    result = run_module("evaluator", "run", "big_proj", str(submission), "--device", "cpu",
                        imported=tmp_path / "out")
    assert result.returncode != 0 and "has no shape the CPU development device runs" in result.stderr, (
        result.stderr
    )


def test_a_reference_that_draws_its_own_random_numbers_is_refused_with_why(tmp_path: Path) -> None:
    folder = scale_rows(tmp_path / "src" / "dropout", name="dropout_rows",
                        reference="import torch\n\ndef run(x):\n    return x * (torch.rand_like(x) > 0.5)\n")
    item = only(import_problems("sol-execbench", folder, tmp_path / "out"))
    assert item.status == "refused" and "needs a deterministic reference" in str(item.reason), item.reason


def test_an_op_only_a_gpu_runs_is_named_as_a_hardware_dependency() -> None:
    from evaluator.importers.validate import _hardware_hint

    hint = _hardware_hint(ValueError("Invalid scaling configuration.\n- For TensorWise scaling, a and b ..."))
    assert "torch._scaled_mm with block scales" in hint and "hardware dependency" in hint
    assert _hardware_hint(ValueError("shapes cannot be multiplied")) == ""


ROUTED_PROJECTION = """
import torch

def run(x, w):
    with open(CALLS, "a") as calls:
        calls.write("call\\n")
    rows = (x[:, 0] > 0).nonzero()  # values decide the work: fake tensors cannot follow it
    return x @ w.reshape(12288, 12288).t() + rows.numel()
"""


def test_a_gpu_only_reference_fake_tensors_cannot_follow_is_refused_after_its_smallest_shape(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls.txt"
    folder = sxb_definition(
        tmp_path / "src" / "routed", name="routed",
        reference=ROUTED_PROJECTION.replace("CALLS", repr(str(calls))),
        axes={"tokens": {"type": "var"}, "hidden": {"type": "const", "value": 12288}},
        inputs={"x": {"shape": ["tokens", "hidden"], "dtype": "float32"},
                "w": {"shape": ["hidden", "hidden"], "dtype": "float32"}},
        outputs={"y": {"shape": ["tokens", "hidden"], "dtype": "float32"}},
        workloads=[workload(f"t{n}", {"tokens": n}) for n in (16, 32, 64, 128)])
    item = only(import_problems("sol-execbench", folder, tmp_path / "out"))
    assert item.status == "refused" and "no shape can be checked here" in str(item.reason), item.reason
    # two calls look for a smaller CPU shape, one validates the smallest workload; the other three
    # workloads are not tried
    assert len(calls.read_text().splitlines()) == 3


def test_numpy_on_a_fake_tensor_is_a_fake_tensor_limit_not_an_error_of_the_problem() -> None:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from evaluator.importers.rk_probe import fake_limit

    # a reference that takes its values to numpy (dataset p_048's MoE dispatch) needs real values:
    # under fake tensors that is a limit of the fake pass, so the shape runs for real where it fits
    with pytest.raises(RuntimeError) as raised, FakeTensorMode():
        torch.ones(2).numpy()
    assert fake_limit(raised.value)
    assert not fake_limit(RuntimeError("shapes cannot be multiplied"))
