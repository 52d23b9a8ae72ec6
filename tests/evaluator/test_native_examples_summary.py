"""benchmarks/native_examples.py's table, read from reports built with the evaluator's own models:
a GPU round of the native examples must say in one line per shape what failed and why (the worst
element of a wrong result, the driver's words for a launch error) and show the executed HGMMA /
UTMALDG counts of a passing one."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from evaluator.report import (
    CorrectnessCheck,
    ErrorStats,
    FeatureEvidence,
    KernelProfile,
    ProfileReport,
    ShapeReport,
    Status,
    WorstElement,
)

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "native_examples.py"


@functools.cache
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("native_examples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _dump(model: object) -> dict:  # type: ignore[type-arg]
    return json.loads(model.model_dump_json())  # type: ignore[attr-defined]


def test_a_wrong_shape_names_its_check_and_worst_element() -> None:
    worst = WorstElement(output="O", index=[0, 3, 76, 5], got=0.5, expected=0.25, abs_error=0.25)
    check = CorrectnessCheck(trial="seed 2 / outliers", distribution="outliers", seed=2, passed=False,
                             status=Status.INCORRECT_NUMERICAL, errors={"O": ErrorStats(
                                 max_abs_error=0.25, max_rel_error=1.0, matched_ratio=0.9, nonfinite_count=0,
                                 worst=[worst])})
    shape = ShapeReport(shape_id="b2_h1_s77_d128_causal1", axes={"S": 77}, ranked=False,
                        status=Status.INCORRECT_NUMERICAL, message="values outside tolerance", checks=[check])
    row = script().shape_row(_dump(shape))
    assert (
        "INCORRECT_NUMERICAL" in row
        and "seed 2 / outliers (outliers): O[0, 3, 76, 5] = 0.5 expected 0.25" in row
    )


def test_a_launch_error_keeps_the_drivers_words() -> None:
    shape = ShapeReport(shape_id="m16_n64_k128", axes={"M": 16}, ranked=False, status=Status.RUNTIME_ERROR,
                        message="CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in script().shape_row(_dump(shape))


def test_executed_tensor_core_and_tma_counts_are_summed_over_kernels() -> None:
    profile = ProfileReport(available=True, kernels=[
        KernelProfile(name="k", executed_instructions={"HGMMA": 16384, "UTMALDG": 512, "IMAD": 9}),
        KernelProfile(name="k", executed_instructions={"HGMMA": 16384})])
    shape = ShapeReport(
        shape_id="s", axes={}, ranked=True, status=Status.INCORRECT_NUMERICAL, profile=profile
    )
    assert script().executed_counts(_dump(shape)) == {"HGMMA": 32768, "QGMMA": 0, "UTMALDG": 512, "HMMA": 0}


def test_the_evidence_line_says_what_is_missing_at_which_level() -> None:
    evidence = FeatureEvidence(arch="sm_90a", required=["wgmma", "tma"], missing=["wgmma", "tma"],
                               evidence_level="executed", executed_families={"HMMA": 4096})
    line = script().evidence_line({"evidence": _dump(evidence)})
    assert (
        line == "  evidence (executed, sm_90a): required wgmma, tma, missing wgmma, tma; executed HMMA 4,096"
    )


def test_an_evaluator_that_gave_no_report_is_one_line_with_its_reason() -> None:
    module = script()
    example = module.EXAMPLES[0]
    assert module.summary(example, {"failure": "the evaluator ran past 400 s and was stopped"}) == [
        f"{example.name} [{example.problem}]: NO REPORT: the evaluator ran past 400 s and was stopped"]


def test_every_native_example_file_is_in_the_round() -> None:
    root = SCRIPT.parents[1]
    listed = {example.path for example in script().EXAMPLES}
    on_disk = {str(path.relative_to(root)) for folder in ("examples/cuda", "examples/ptx")
               for path in (root / folder).iterdir() if path.suffix in (".cu", ".ptx")}
    sources_of_ptx = {"examples/ptx/gemm_bf16_mma.cu", "examples/ptx/gemm_bf16_wgmma_tma.cu"}
    assert listed == on_disk - sources_of_ptx
