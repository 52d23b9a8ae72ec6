"""Importing problems written for SOL-ExecBench and GPU MODE reference-kernels (docs/importing.md).

The fixtures under tests/fixtures/import/ are small problems in each format, modelled on real
ones, good and broken. Every broken one must be reported (refused, with the reason), never crash the
import; a converted one must load through the catalogue's loader, pass the same validation as a
native problem, and PASS the CPU harness with its own reference as the submission.

Modules: `evaluator/importers/reference_kernels.py`, `evaluator/importers/sol_execbench.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluator.importers import ImportReport, import_problems
from evaluator.importers.common import problem_name, rewrite_devices
from evaluator.problems import IMPORTED_DIR_ENV, imported_dir, load_catalogue, load_problem
from evaluator.problems.dims import evaluate
from tests.evaluator.import_sources import run_harness
from tests.harness_helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "import"
SXB = FIXTURES / "sol-execbench"
RK = FIXTURES / "reference-kernels"
RK_SET = RK / "problems" / "pmpp_like"


def outcomes(report: ImportReport) -> dict[str, Any]:
    """Outcomes by the source folder's name (``[import] source`` is ``REPO:PATH@COMMIT``)."""
    return {Path(item.source.split(":", 1)[-1].split("@")[0]).name: item for item in report.problems}


@pytest.fixture(scope="module")
def sxb(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportReport, Path]:
    out = tmp_path_factory.mktemp("sxb")
    return import_problems("sol-execbench", SXB, out), out


@pytest.fixture(scope="module")
def rk(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportReport, Path]:
    out = tmp_path_factory.mktemp("rk")
    return import_problems("reference-kernels", RK, out), out


@pytest.fixture
def catalogue_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point the catalogue's imported folder somewhere (for this test only)."""

    def point(folder: Path) -> None:
        monkeypatch.setenv(IMPORTED_DIR_ENV, str(folder))
        load_catalogue.cache_clear()

    yield point
    monkeypatch.delenv(IMPORTED_DIR_ENV, raising=False)
    load_catalogue.cache_clear()


# ---------------------------------------------------------------- SOL-ExecBench


def test_sol_execbench_fixtures_are_each_converted_partially_converted_or_refused(sxb: Any) -> None:
    report, out = sxb
    got = outcomes(report)
    assert {name: item.status for name, item in got.items()} == {
        "rmsnorm_h256": "converted",
        "embedding_gather": "partial",
        "missing_reference": "refused",
        "fp4_weights": "refused",
        "no_workloads": "refused",
        "wrong_output_shape": "refused",
    }
    assert "missing reference" in str(got["missing_reference"].reason)
    assert "float4_e2m1fn_x2" in str(got["fp4_weights"].reason) and "no fp4 tensors" in str(
        got["fp4_weights"].reason
    )
    assert got["no_workloads"].reason.startswith("shapes missing")
    # refused by the same validation a native problem gets: the declared shape is checked
    assert "declared (3, 128)" in str(got["wrong_output_shape"].reason)
    assert sorted(path.name for path in out.iterdir()) == ["embedding_gather_v1000_h128", "rmsnorm_h256"]


def test_partial_conversion_lists_what_was_dropped(sxb: Any) -> None:
    partial = outcomes(sxb[0])["embedding_gather"]
    dropped = "\n".join(partial.dropped)
    assert "workload e4-recorded: input 'table' comes from a safetensors file" in dropped
    assert "a data dependency" in dropped
    # a workload with its own tolerance is kept, with that tolerance (no longer dropped)
    assert "e5-loose" not in dropped and partial.shapes == 4
    assert partial.counts == "derived" and partial.rankable


def test_a_converted_definition_loads_through_the_catalogue_loader_as_declared(sxb: Any) -> None:
    problem = load_problem(sxb[1] / "rmsnorm_h256")
    assert problem.axes == ("batch_size", "hidden_size")
    assert [(s.name, s.shape, s.dtype) for s in problem.inputs] == [
        ("input", ("batch_size", "hidden_size"), "bfloat16"), ("weight", ("hidden_size",), "bfloat16")]
    assert [(s.name, s.dtype) for s in problem.outputs] == [("output", "bfloat16")]
    tolerance = problem.tolerance_for("output")
    assert (tolerance.atol, tolerance.rtol, tolerance.matched_ratio) == (1e-2, 1e-2, 0.99)
    assert [shape.axes["batch_size"] for shape in problem.shapes] == [1, 7, 33, 512, 4096]
    assert all(shape.ranked for shape in problem.shapes)  # counts.py came with it: rankable
    assert [shape.axes["batch_size"] for shape in problem.shapes if shape.cpu] == [1, 7]
    assert problem.counts({"batch_size": 2, "hidden_size": 256}).bytes == 2 * (2 * 2 * 256 + 256)
    assert problem.imported["format"] == "sol-execbench" and problem.imported["counts"] == "provided"
    assert problem.distributions == ("upstream",)


def test_counts_are_derived_when_the_source_gives_none(sxb: Any) -> None:
    problem = load_problem(sxb[1] / "embedding_gather_v1000_h128")
    assert problem.imported["counts"] == "derived" and problem.ranked_shapes == problem.shapes
    counts = problem.counts(dict(problem.shapes[0].axes))
    # a gather computes nothing; it reads the ids and the rows (the whole table: compulsory traffic
    # counts every input once) and writes the output
    axes = dict(problem.shapes[0].axes)
    assert (
        counts.flops == {}
        and counts.bytes == 8 * axes["num_tokens"] + 2 * 1000 * 128 + 2 * axes["num_tokens"] * 128
    )


def test_custom_inputs_come_from_the_definitions_entrypoint_seeded_per_call(sxb: Any) -> None:
    module = load_problem(sxb[1] / "embedding_gather_v1000_h128").reference_module()
    axes = {"num_tokens": 65, "vocab_size": 1000, "hidden_size": 128}
    first = module.generate_inputs(axes, 1, "cpu", "upstream")
    again = module.generate_inputs(axes, 1, "cpu", "upstream")
    other = module.generate_inputs(axes, 2, "cpu", "upstream")
    assert first["ids"].dtype == __import__("torch").int64 and int(first["ids"].max()) < 1000
    assert all(bool((first[name] == again[name]).all()) for name in first)
    assert not bool((first["ids"] == other["ids"]).all())


def test_the_harness_passes_a_definitions_own_reference_as_the_submission(sxb: Any, tmp_path: Path) -> None:
    source = (SXB / "rmsnorm_h256" / "reference.py").read_text()
    submission = tmp_path / "rmsnorm_ref.py"
    # eps is a fixed scalar: the kernel does not receive it, it knows it
    submission.write_text(
        source + "\n\ndef kernel(input, weight, output):\n    output.copy_(run(input, weight, 1e-6))\n"
    )
    report = run_harness("rmsnorm_h256", submission, sxb[1])
    assert report["status"] == "PASSED", report.get("message")
    assert [shape["status"] for shape in report["shapes"]] == ["PASSED", "PASSED"]


def test_a_wrong_kernel_fails_the_converted_problem(sxb: Any, tmp_path: Path) -> None:
    submission = tmp_path / "no_norm.py"
    submission.write_text("def kernel(input, weight, output):\n    output.copy_(input * weight)\n")
    report = run_harness("rmsnorm_h256", submission, sxb[1])
    assert report["status"] != "PASSED"


def _definition(folder: Path, **changes: Any) -> Path:
    folder.mkdir(parents=True)
    definition = {
        "name": "scaled_rows",
        "axes": {
            "rows": {"type": "var"},
            "hidden": {"type": "const", "value": 64},
            "double": {"type": "expr", "expression": "hidden * 2"},
        },
        "constraints": ["rows <= 64"],
        "inputs": {
            "x": {"shape": ["rows", "double"], "dtype": "float32"},
            "times": {"shape": None, "dtype": "int32"},
        },
        "outputs": {"y": {"shape": ["rows", "double"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x, times):\n    return x * times\n",
    }
    definition.update(changes)
    (folder / "definition.json").write_text(json.dumps(definition))
    rows = [
        {
            "uuid": f"r{n}",
            "axes": {"rows": n},
            "inputs": {"x": {"type": "random"}, "times": {"type": "scalar", "value": n % 3 + 1}},
        }
        for n in (1, 5, 64, 100)
    ]
    (folder / "workload.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return folder


def test_int_scalars_become_axes_passed_as_keywords_and_constraints_drop_workloads(tmp_path: Path) -> None:
    report = import_problems("sol-execbench", _definition(tmp_path / "src" / "scaled"), tmp_path / "out")
    (item,) = report.problems
    assert item.status == "partial", item.reason
    assert any("workload r100: violates the constraint 'rows <= 64'" in text for text in item.dropped)
    problem = load_problem(tmp_path / "out" / "scaled_rows")
    assert problem.axes == ("rows", "hidden", "double", "times") and problem.scalar_args == ("times",)
    assert problem.inputs[0].shape == ("rows", "double")
    shape = problem.shapes[1]
    assert dict(shape.axes) == {"rows": 5, "hidden": 64, "double": 128, "times": 3}
    module = problem.reference_module()
    inputs = module.generate_inputs(dict(shape.axes), 1, "cpu", "upstream")
    y = __import__("torch").empty(5, 128)
    module.baseline(inputs["x"], y, **problem.call_kwargs(dict(shape.axes)))
    assert bool((y == inputs["x"] * 3).all())


def test_float_scalars_that_vary_keep_one_value_and_report_the_rest(tmp_path: Path) -> None:
    folder = _definition(tmp_path / "src" / "scaled", inputs={
        "x": {"shape": ["rows", "double"], "dtype": "float32"}, "times": {"shape": None, "dtype": "float32"}})
    rows = [{"uuid": f"r{n}", "axes": {"rows": n}, "inputs": {"times": {"type": "scalar", "value": value}}}
            for n, value in ((1, 1.0), (5, 2.5), (7, 2.5))]
    (folder / "workload.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out").problems
    assert item.status == "partial", item.reason
    assert any("workload r1: scalar times = 1.0 (only times = 2.5 kept" in text for text in item.dropped)
    assert load_problem(tmp_path / "out" / "scaled_rows").scalar_args == ()


def test_a_reference_whose_run_does_not_take_the_inputs_is_refused(tmp_path: Path) -> None:
    folder = _definition(tmp_path / "src" / "bad", reference="import torch\n\ndef run(x):\n    return x\n")
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out").problems
    assert item.status == "refused" and "does not take the definition's inputs" in str(item.reason)


def test_a_problem_named_like_a_native_one_is_refused_unless_prefixed(tmp_path: Path) -> None:
    folder = _definition(tmp_path / "src" / "clash", name="vector_add")
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out", dry_run=True).problems
    assert item.status == "refused" and "native problem" in str(item.reason)
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out", dry_run=True, prefix="sxb_").problems
    assert item.status == "partial" and item.name == "sxb_vector_add"
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_importing_again_is_unchanged_and_a_changed_source_needs_replace(tmp_path: Path) -> None:
    folder = tmp_path / "src" / "rmsnorm_h256"
    shutil.copytree(SXB / "rmsnorm_h256", folder)
    out = tmp_path / "out"
    assert [item.status for item in import_problems("sol-execbench", folder, out).problems] == ["converted"]
    assert [item.status for item in import_problems("sol-execbench", folder, out).problems] == ["unchanged"]
    workloads = folder / "workload.jsonl"
    workloads.write_text(workloads.read_text().replace('"batch_size": 512', '"batch_size": 500'))
    (item,) = import_problems("sol-execbench", folder, out).problems
    assert item.status == "refused" and "--replace" in str(item.reason)
    (item,) = import_problems("sol-execbench", folder, out, replace=True).problems
    assert item.status == "converted" and item.version == 2
    problem = load_problem(out / "rmsnorm_h256")
    assert problem.version == 2 and 500 in [shape.axes["batch_size"] for shape in problem.shapes]
    assert sorted(path.name for path in out.iterdir()) == ["rmsnorm_h256"]  # no staging left behind


# ---------------------------------------------------------------- GPU MODE reference-kernels


def test_reference_kernels_fixtures_are_each_converted_partially_converted_or_refused(rk: Any) -> None:
    got = outcomes(rk[0])
    assert {name: item.status for name, item in got.items()} == {
        "vectoradd_py": "converted",
        "softmax_py": "converted",
        "matmul_py": "converted",
        "vectorsum_py": "partial",
        "histogram_py": "converted",
        "noref_py": "refused",
        "noshapes_py": "refused",
        "prefixsum_py": "converted",
    }
    assert got["noref_py"].reason.startswith("missing reference")
    assert got["noshapes_py"].reason.startswith("shapes missing")
    # the set's name comes first: pmpp and pmpp_v2 tasks of one name never clash
    assert got["vectoradd_py"].name == "pmpp_like_vectoradd_py"
    for name in ("vectoradd_py", "matmul_py", "histogram_py", "prefixsum_py"):
        assert got[name].counts == "derived" and got[name].rankable, name
    assert got["softmax_py"].counts == "provided"


def test_output_buffers_in_the_data_tuple_become_outputs(rk: Any) -> None:
    vectoradd = load_problem(rk[1] / "pmpp_like_vectoradd_py")
    assert [(s.name, s.shape, s.dtype) for s in vectoradd.inputs] == [
        ("A", ("size", "size"), "float16"), ("B", ("size", "size"), "float16")]
    assert [(s.name, s.shape) for s in vectoradd.outputs] == [("output", ("size", "size"))]
    assert (vectoradd.atol, vectoradd.rtol) == (1e-8, 1e-5)  # make_match_reference's defaults
    assert [s.axes["size"] for s in vectoradd.shapes if s.cpu] == [127, 128]
    # matmul: c is never read by ref_kernel, which returns a new tensor of c's shape
    matmul = load_problem(rk[1] / "pmpp_like_matmul_py")
    assert [(s.name, s.shape) for s in matmul.inputs] == [("a", ("m", "k")), ("b", ("k", "n"))]
    assert [(s.name, s.shape) for s in matmul.outputs] == [("c", ("m", "n"))]
    notes = "\n".join(outcomes(rk[0])["matmul_py"].notes)
    assert "data leaf 2 (c) is an output buffer: ref_kernel never reads it" in notes


def test_a_one_element_buffer_takes_a_0d_result_and_item_calls_run_for_real(rk: Any) -> None:
    vectorsum = load_problem(rk[1] / "pmpp_like_vectorsum_py")
    assert [(s.name, s.shape) for s in vectorsum.inputs] == [("x", ("size",))]
    assert [(s.name, s.shape, s.dtype) for s in vectorsum.outputs] == [("output", (1,), "float32")]
    # .item() in generate_input: the tests ran for real; the too-big benchmark follows their sizes,
    # stays a shape, and is unranked for want of counts (its reference needs real values)
    assert [dict(s.axes) for s in vectorsum.shapes if not s.cpu] == [{"size": 16777216}]
    dropped = "\n".join(outcomes(rk[0])["vectorsum_py"].dropped)
    assert not vectorsum.ranked_shapes or "no counts" in dropped


def test_a_task_with_counts_is_rankable_on_its_benchmarks(rk: Any) -> None:
    softmax = load_problem(rk[1] / "pmpp_like_softmax_py")
    assert [(s.name, s.shape) for s in softmax.inputs] == [("data", ("rows", "cols"))]
    assert [(s.name, s.shape, s.dtype) for s in softmax.outputs] == [("output", ("rows", "cols"), "float32")]
    assert [(dict(s.axes), s.ranked, s.cpu) for s in softmax.shapes] == [
        # one CPU shape: the next is 87 times larger (a second one must be near the first's size)
        ({"rows": 3, "cols": 1000}, False, True),
        ({"rows": 64, "cols": 4096}, False, False),
        ({"rows": 4096, "cols": 4096}, True, False),
        ({"rows": 1024, "cols": 32768}, True, False),
    ]  # task.yml order
    assert (softmax.atol, softmax.rtol) == (1e-6, 1e-4)


def test_device_literals_follow_the_device_of_each_call(rk: Any) -> None:
    upstream = (rk[1] / "pmpp_like_softmax_py" / "upstream" / "reference.py").read_text()
    assert '"cuda"' not in upstream.split("\n", 1)[1] and ".cuda()" not in upstream
    module = load_problem(rk[1] / "pmpp_like_softmax_py").reference_module()
    inputs = module.generate_inputs({"rows": 3, "cols": 1000}, 1, "cpu", "upstream")
    assert inputs["data"].device.type == "cpu"


def test_a_tolerance_computed_from_the_size_is_read_at_every_shape(rk: Any) -> None:
    problem = load_problem(rk[1] / "pmpp_like_prefixsum_py")
    assert [(s.name, s.dtype) for s in problem.outputs] == [("y", "float32")]
    by_size = {shape.axes["size"]: problem.tolerance_for("y", dict(shape.axes)) for shape in problem.shapes}
    # check_implementation: rtol = atol = 1e-5 * sqrt(size)
    assert all(
        abs(tol.rtol - 1e-5 * size**0.5) < 1e-12 and tol.atol == tol.rtol for size, tol in by_size.items()
    )


def test_a_custom_check_converts_with_a_tolerance_given_on_the_command_line(tmp_path: Path) -> None:
    task = tmp_path / "src" / "probes" / "rowmax_py"
    shutil.copytree(RK_SET / "vectorsum_py", task)
    shutil.copy(RK_SET / "utils.py", task.parent / "utils.py")
    reference = task / "reference.py"
    text = reference.read_text().split("check_implementation")[0]
    reference.write_text(
        text + "def check_implementation(data, output):\n    return bool(output.isfinite().all()), ''\n"
    )
    (item,) = import_problems("reference-kernels", task, tmp_path / "out").problems
    assert (
        item.status == "refused" and "compares no output" in str(item.reason) and "--atol" in str(item.reason)
    )
    # the reason says why SOLboard cannot hold the check and when a tolerance may stand in for it
    assert "element by element" in str(item.reason) and "result is unique" in str(item.reason)
    (item,) = import_problems("reference-kernels", task, tmp_path / "out", atol=1e-3, rtol=1e-3).problems
    assert item.status in ("converted", "partial"), item.reason
    problem = load_problem(tmp_path / "out" / "probes_rowmax_py")
    assert (problem.atol, problem.rtol) == (1e-3, 1e-3)
    assert any("given on the command line" in note for note in item.notes)


def test_the_harness_passes_a_tasks_own_reference_as_the_submission(rk: Any, tmp_path: Path) -> None:
    submission = tmp_path / "vectoradd_ref.py"
    submission.write_text("def kernel(A, B, output):\n    output.copy_(A + B)\n")
    report = run_harness("pmpp_like_vectoradd_py", submission, rk[1])
    assert report["status"] == "PASSED", report.get("message")
    matmul = tmp_path / "matmul_ref.py"
    matmul.write_text("def kernel(a, b, c):\n    c.copy_(a @ b)\n")
    assert run_harness("pmpp_like_matmul_py", matmul, rk[1])["status"] == "PASSED"
    vectorsum = tmp_path / "vectorsum_ref.py"
    vectorsum.write_text(
        "import torch\n\n\ndef kernel(x, output):\n    output.copy_(x.sum(dtype=torch.float64).reshape(1))\n"
    )
    assert run_harness("pmpp_like_vectorsum_py", vectorsum, rk[1])["status"] == "PASSED"


# ---------------------------------------------------------------- the catalogue, the CLI, helpers


def test_the_catalogue_reads_the_imported_folder_next_to_the_native_problems(
    sxb: Any, catalogue_reads: Any
) -> None:
    assert imported_dir() == REPO / "evaluator" / "problems" / "imported" or os.environ.get(IMPORTED_DIR_ENV)
    native = set(load_catalogue())
    catalogue_reads(sxb[1])
    catalogue = load_catalogue()
    assert set(catalogue) == native | {"rmsnorm_h256", "embedding_gather_v1000_h128"}
    assert catalogue["rmsnorm_h256"].folder == sxb[1] / "rmsnorm_h256"
    assert not catalogue["vector_add"].imported and catalogue["rmsnorm_h256"].imported


def test_the_cli_prints_a_json_report_and_exits_1_when_something_was_refused(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "evaluator", "import-problems", "--format", "reference-kernels",
            str(RK_SET / "noref_py"), "--out", str(tmp_path), "--json"]
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 1, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["summary"]["refused"] == 1 and report["problems"][0]["status"] == "refused"
    empty = subprocess.run([sys.executable, "-m", "evaluator", "import-problems", "--format", "sol-execbench",
                            str(RK_SET)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert empty.returncode == 2 and "no sol-execbench problem" in empty.stderr


def test_rewrite_devices_replaces_literals_and_defines_the_name_after_the_docstring() -> None:
    source = ('"""Doc."""\nfrom __future__ import annotations\nimport torch\n'
              'x = torch.ones(2, device="cuda:0").cuda()\n')
    rewritten, count = rewrite_devices(source)
    assert count == 2
    lines = rewritten.splitlines()
    assert lines[2].startswith("_SOLBOARD_DEVICE = ")
    assert lines[4] == "x = torch.ones(2, device=_SOLBOARD_DEVICE).to(_SOLBOARD_DEVICE)"
    assert rewrite_devices("print('no device here')\n") == ("print('no device here')\n", 0)


def test_names_and_expressions() -> None:
    assert problem_name("001_Attention-Softmax") == "p_001_attention_softmax"
    assert evaluate("size - k + 1", {"size": 32, "k": 4}) == 29
    assert problem_name("fp8-mm", "gpumode_") == "gpumode_fp8_mm"
    assert evaluate("H_kv * H_r", {"H_kv": 8, "H_r": 4}) == 32
    assert evaluate("a == b * 2 and b < 5", {"a": 8, "b": 4}) is True
    with pytest.raises(ValueError):
        evaluate("__import__('os')", {})


def test_make_match_reference_tolerances_are_read_from_the_source_when_constant() -> None:
    import ast

    from evaluator.importers.rk_task import declared_tolerance, match_defaults

    def read(source: str) -> Any:
        return declared_tolerance(
            ast.parse(source),
            match_defaults("def match_reference(d, o, reference, rtol=2e-5, atol=3e-8): pass"),
        )

    assert read("check_implementation = make_match_reference(ref_kernel)") == {"rtol": 2e-5, "atol": 3e-8}
    assert read("check_implementation = make_match_reference(ref_kernel, rtol=1e-3, atol=1e-4)") == {
        "rtol": 1e-3, "atol": 1e-4}
    # anything else is read by running the check (test_import_faithful.py)
    assert read("check_implementation = make_match_reference(ref_kernel, tol_err_ratio=0.05)") is None
    assert (
        read("def check_implementation(d, o):\n    return match_reference(d, o, reference=r, atol=0.5)\n")
        is None
    )
