"""PTX/CUDA submissions on a real GPU (H100/H200): examples correct, faults and hangs reported.

Skipped without CUDA. benchmarks/ptx_smoke.py runs the same checks over every catalogue shape and
times them; its H200 results are in benchmarks/results/ptx.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    ("vector_add", "ptx", "examples/ptx/vector_add.ptx", [{"N": 4099}, {"N": 1 << 20}]),
    ("vector_add", "cuda", "examples/cuda/vector_add.cu", [{"N": 3}, {"N": 65537}]),
    (
        "gemm_bf16",
        "ptx",
        "examples/ptx/gemm_bf16_mma.ptx",
        [{"M": 33, "N": 96, "K": 256}, {"M": 77, "N": 130, "K": 100}],
    ),
    (
        "gemm_bf16",
        "ptx",
        "examples/ptx/gemm_bf16_wgmma_tma.ptx",
        [{"M": 1, "N": 7168, "K": 5120}, {"M": 200, "N": 300, "K": 72}],
    ),
    ("gemm_bf16", "cuda", "examples/ptx/gemm_bf16_wgmma_tma.cu", [{"M": 8, "N": 64, "K": 128}]),
]


def evaluate_once(name: str, language: str, path: str, axes: dict[str, int]) -> tuple[bool, Any]:
    from evaluator.problems import get_problem
    from evaluator.ptx.loader import load_native_kernel

    problem = get_problem(name)
    refmod = problem.reference_module()
    kernel = load_native_kernel(language, (ROOT / path).read_text(), None, problem, "cuda")
    inputs = refmod.generate_inputs(axes, 7, "cuda", problem.distributions[0])
    out = problem.outputs[0]
    result = torch.full(
        out.concrete_shape(axes), float("nan"), dtype=getattr(torch, out.dtype), device="cuda"
    )
    kernel.for_shape(axes)(*[inputs[t.name] for t in problem.inputs], result)
    torch.cuda.synchronize()
    expected = refmod.reference(inputs, axes)[out.name]
    error = (result.double() - expected).abs()
    return bool((error <= problem.atol + problem.rtol * expected.abs()).all()), kernel.evidence


@pytest.mark.parametrize(("name", "language", "path", "shapes"), EXAMPLES)
def test_each_example_is_correct_on_the_gpu(
    name: str, language: str, path: str, shapes: list[dict[str, int]]
) -> None:
    for axes in shapes:
        correct, evidence = evaluate_once(name, language, path, axes)
        assert correct, (path, axes)
    if "wgmma" in path:
        assert evidence.missing == []


def vector_add_with(spec: str | None, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[bool, Any]:
    from evaluator.problems import get_problem
    from evaluator.ptx.loader import load_native_kernel

    kernel = load_native_kernel(
        "ptx", (ROOT / "examples/ptx/vector_add.ptx").read_text(), spec, get_problem("vector_add"), "cuda"
    )
    a, b = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    c = torch.full_like(a, float("nan"))
    kernel.for_shape({"N": 1 << 16})(a, b, c)
    torch.cuda.synchronize()
    return bool(torch.equal(c, a + b)), kernel


def test_a_cluster_launch_goes_through_cuLaunchKernelEx() -> None:
    spec = (ROOT / "examples/ptx/vector_add.ptx").read_text().split("// solboard-launch:")[1].split("\n\n")[0]
    spec = (
        spec.replace("// ", "").replace('"cdiv(N, 1024)"', '"2 * cdiv(N, 2048)"') + "\ncluster = [2, 1, 1]\n"
    )
    correct, kernel = vector_add_with(spec)
    assert correct and kernel.spec.cluster == (2, 1, 1)


def test_without_ptxas_the_driver_jit_compiles_the_ptx(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.ptx import build

    monkeypatch.setattr(build, "find_tool", lambda name: None)
    correct, kernel = vector_add_with(None)
    assert correct and kernel.build.cubin is None and kernel.evidence.sass_families == {}


def run_evaluator(*args: str, timeout: float = 240) -> dict[str, Any]:
    command = [sys.executable, "-m", "evaluator", "run", *args, "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_kernel_that_faults_is_a_runtime_error_with_the_drivers_message() -> None:
    report = run_evaluator(
        "vector_add", "tests/fixtures/ptx/fault.ptx", "--language", "ptx", "--shapes", "quick"
    )
    assert report["status"] == "RUNTIME_ERROR"
    assert "illegal" in json.dumps(report).lower()


def test_a_kernel_that_hangs_is_stopped_as_a_timeout() -> None:
    report = run_evaluator(
        "vector_add", "tests/fixtures/ptx/spin.ptx", "--language", "ptx", "--time-limit-test", "10"
    )
    assert report["status"] == "TIMEOUT"


def test_the_wgmma_example_passes_the_harness_with_its_evidence() -> None:
    report = run_evaluator(
        "gemm_bf16", "examples/ptx/gemm_bf16_wgmma_tma.ptx", "--language", "ptx", "--shapes", "quick"
    )
    assert report["status"] == "PASSED"
    assert report["evidence"]["sass_families"]["HGMMA"] > 0 and report["evidence"]["missing"] == []
