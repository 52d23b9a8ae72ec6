"""People coming from GPU MODE and SOL-ExecBench submit what they wrote there: a ``submission.py``
with ``custom_kernel(data)`` for a problem imported from reference-kernels, a ``solution.json``
for one imported from SOL-ExecBench, through the normal path (the CPU harness here).

Modules: `evaluator/importers/foreign.py`, `evaluator/importers/rk_adapter.py`,
`evaluator/importers/sxb_adapter.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.importers import import_problems
from tests.evaluator.import_sources import run_harness
from tests.harness_helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "import"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imported")
    rk = FIXTURES / "reference-kernels" / "problems" / "pmpp_like"
    for task in ("vectoradd_py", "matmul_py"):
        (item,) = import_problems("reference-kernels", rk / task, out).problems
        assert item.status == "converted", item.reason
    (item,) = import_problems("sol-execbench", FIXTURES / "sol-execbench" / "rmsnorm_h256", out).problems
    assert item.status == "converted", item.reason
    return out


# ---------------------------------------------------------------- GPU MODE


GPU_MODE_BUFFER = '''
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, output = data
    output[...] = a + b
    return output
'''

GPU_MODE_NEW_TENSOR = '''
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    return torch.matmul(a, b)
'''


def test_a_gpu_mode_submission_passes_as_it_is(imported: Path, tmp_path: Path) -> None:
    buffer = tmp_path / "submission.py"
    buffer.write_text(GPU_MODE_BUFFER)
    report = run_harness("pmpp_like_vectoradd_py", buffer, imported)
    assert report["status"] == "PASSED", report.get("message")
    fresh = tmp_path / "matmul_submission.py"
    fresh.write_text(GPU_MODE_NEW_TENSOR)
    assert run_harness("pmpp_like_matmul_py", fresh, imported)["status"] == "PASSED"


def test_a_wrong_gpu_mode_submission_fails(imported: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "submission.py"
    wrong.write_text(GPU_MODE_BUFFER.replace("a + b", "a - b"))
    assert run_harness("pmpp_like_vectoradd_py", wrong, imported)["status"] != "PASSED"


def test_a_file_with_neither_contract_is_told_both(imported: Path, tmp_path: Path) -> None:
    neither = tmp_path / "submission.py"
    neither.write_text("from task import input_t, output_t\n\n\ndef solve(data):\n    return data\n")
    report = run_harness("pmpp_like_vectoradd_py", neither, imported)
    assert report["status"] == "COMPILE_ERROR"
    assert "kernel(A, B, output)" in report["message"] and "custom_kernel(data)" in report["message"]


# ---------------------------------------------------------------- SOL-ExecBench


def solution(entry: str, source: str, *, dps: bool = False, language: str = "pytorch",
             definition: str = "rmsnorm_h256") -> str:
    return json.dumps({
        "name": "my_rmsnorm", "definition": definition, "author": "test",
        "spec": {"languages": [language], "target_hardware": ["LOCAL"], "entry_point": entry,
                 "dependencies": ["torch"], "destination_passing_style": dps},
        "sources": [{"path": entry.split("::")[0], "content": source}],
    })


RMSNORM = '''
import torch


def run(input, weight, eps):
    x = input.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(input.dtype)
'''

RMSNORM_DPS = '''
import torch


def run(input, weight, eps, output):
    x = input.float()
    output.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
'''


@pytest.mark.parametrize(("source", "dps"), [(RMSNORM, False), (RMSNORM_DPS, True)])
def test_a_sol_execbench_solution_json_passes_as_it_is(
    imported: Path, tmp_path: Path, source: str, dps: bool
) -> None:
    path = tmp_path / "solution.json"
    path.write_text(solution("kernel.py::run", source, dps=dps))
    report = run_harness("rmsnorm_h256", path, imported)
    assert report["status"] == "PASSED", report.get("message")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            solution("main.cpp::run", "// cuda", language="cuda_cpp"),
            "is a native kernel: the site takes it as a CUDA",
        ),
        (solution("kernel.py::run", RMSNORM, definition="softmax_h4096"), "not 'rmsnorm_h256'"),
        (solution("kernel.py::forward", RMSNORM), "defines no callable forward"),
    ],
)
def test_a_solution_json_that_does_not_fit_says_why(
    imported: Path, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "solution.json"
    path.write_text(text)
    report = run_harness("rmsnorm_h256", path, imported)
    assert report["status"] == "COMPILE_ERROR" and message in report["message"], report.get("message")
