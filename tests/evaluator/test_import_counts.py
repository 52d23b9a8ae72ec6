"""Counts without a hand: a problem imported without counts gets them derived from its reference
(flops by class, compulsory bytes), labelled as such, and ranks; one whose counts are missing
says "no counts" rather than "0 us". And the baseline, which IS the reference, is held to the
tolerance against the reference's float64 formulation (docs/importing.md).

Modules: `evaluator/importers/derived_counts.py`, `evaluator/importers/independent.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.importers import import_problems
from evaluator.importers.render import write_folder
from evaluator.problems import IMPORTED_DIR_ENV, load_problem
from tests.evaluator.import_sources import rk_task, sxb_definition, workload
from tests.harness_helpers import REPO

V_PROJ = """
import torch

def run(hidden_states, v_proj_weight):
    return torch.matmul(hidden_states, v_proj_weight.t())
"""

ROUTER = """
import torch

def run(hidden_states, gate_weight, scale_hidden, scale_weight):
    logits = torch._scaled_mm(hidden_states, gate_weight.t(), scale_a=scale_hidden, scale_b=scale_weight,
                              out_dtype=torch.bfloat16)
    return logits[:, :64]
"""


def evaluator(*args: str, imported: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, IMPORTED_DIR_ENV: str(imported)}
    return subprocess.run([sys.executable, "-m", "evaluator", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bf16 projection GEMM (hidden 5120 -> 1024) and an fp8 router (3584 -> 128 padded experts),
    imported without counts."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("out")
    sxb_definition(
        src / "v_proj", name="v_proj", reference=V_PROJ,
        axes={"batch_size": {"type": "var"}, "seq_len": {"type": "var"}, "hidden_size": {"type": "const", "value": 5120},
              "kv_size": {"type": "const", "value": 1024}},
        inputs={"hidden_states": {"shape": ["batch_size", "seq_len", "hidden_size"], "dtype": "bfloat16"},
                "v_proj_weight": {"shape": ["kv_size", "hidden_size"], "dtype": "bfloat16"}},
        outputs={"v": {"shape": ["batch_size", "seq_len", "kv_size"], "dtype": "bfloat16"}},
        workloads=[workload("small", {"batch_size": 1, "seq_len": 4}), workload("b16", {"batch_size": 16, "seq_len": 128})],
    )
    sxb_definition(
        src / "router", name="fp8_router", reference=ROUTER,
        axes={"M": {"type": "var"}, "hidden_size": {"type": "const", "value": 3584},
              "padded_experts": {"type": "const", "value": 128}, "num_experts": {"type": "const", "value": 64}},
        inputs={"hidden_states": {"shape": ["M", "hidden_size"], "dtype": "float8_e4m3fn"},
                "gate_weight": {"shape": ["padded_experts", "hidden_size"], "dtype": "float8_e4m3fn"},
                "scale_hidden": {"shape": [], "dtype": "float32"}, "scale_weight": {"shape": [], "dtype": "float32"}},
        outputs={"router_logits": {"shape": ["M", "num_experts"], "dtype": "bfloat16"}},
        workloads=[workload("m16", {"M": 16}), workload("m1024", {"M": 1024})],
    )
    report = import_problems("sol-execbench", src, out)
    assert [item.status for item in report.problems] == ["converted", "converted"], [p.reason for p in report.problems]
    assert all(item.counts == "derived" and item.rankable for item in report.problems)
    return out


def test_a_projection_gemm_gets_the_hand_counts_flops_bytes_and_speed_of_light(derived: Path) -> None:
    problem = load_problem(derived / "v_proj")
    assert problem.imported["counts"] == "derived" and problem.ranked_shapes == problem.shapes
    counts = problem.counts({"batch_size": 16, "seq_len": 128, "hidden_size": 5120, "kv_size": 1024})
    assert counts.flops == {"bf16_tensor": 2 * 2048 * 5120 * 1024}  # 2.147e10
    assert counts.bytes == 35_651_584  # 2 (MK + NK + MN) bytes
    result = evaluator("sol", "v_proj", "--gpu", "h200", "--json", imported=derived)
    assert result.returncode == 0, result.stderr
    row = next(row for row in json.loads(result.stdout)["shapes"] if row["axes"]["batch_size"] == 16)
    assert row["bound"] == "compute" and abs(row["t_sol_us"] - 21.714) < 0.01


def test_an_fp8_router_counts_fp8_tensor_flops_of_the_padded_gemm(derived: Path) -> None:
    problem = load_problem(derived / "fp8_router")
    counts = problem.counts({"M": 1024, "hidden_size": 3584, "padded_experts": 128, "num_experts": 64})
    assert counts.flops == {"fp8_tensor": 2 * 1024 * 3584 * 128}  # 9.395e8


def test_a_problem_without_counts_says_no_counts(derived: Path, tmp_path: Path) -> None:
    from evaluator.importers.common import Candidate

    missing = Candidate(
        source=tmp_path, format="sol-execbench", upstream_name="no_counts", name="no_counts", title="t",
        description="d", axes=["n"], inputs=[{"name": "x", "shape": ["n"], "dtype": "float32"}],
        outputs=[{"name": "y", "shape": ["n"], "dtype": "float32"}],
        tolerance={"atol": 0.0, "rtol": 0.0, "matched_ratio": 1.0},
        shapes=[{"n": 8, "ranked": True, "id": "n8", "cpu": True}], baseline="b", adapter={"format": "sol-execbench"},
    )
    write_folder(missing, tmp_path / "imported" / "no_counts", 1)
    result = evaluator("sol", "no_counts", "--gpu", "h200", imported=tmp_path / "imported")
    assert result.returncode == 0, result.stderr
    assert "no counts" in result.stdout and "0.000" not in result.stdout and "compute" not in result.stdout


MATMUL = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    a, b = data
    return a @ b

def generate_input(m, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return torch.randn(m, 256, device="cuda", generator=gen), torch.randn(256, m, device="cuda", generator=gen)

check_implementation = make_match_reference(ref_kernel, rtol=RTOL, atol=ATOL)
"""


def test_a_tolerance_tighter_than_the_references_own_rounding_is_refused(tmp_path: Path) -> None:
    tight = rk_task(tmp_path / "problems" / "pmpp", "matmul_py", reference=MATMUL.replace("RTOL", "1e-7").replace(
        "ATOL", "0.0"), tests=[{"m": 32, "seed": 1}])
    (item,) = import_problems("reference-kernels", tight, tmp_path / "out").problems
    assert item.status == "refused" and "tighter than the reference's own rounding" in str(item.reason), item.reason
    fair = rk_task(tmp_path / "fair" / "pmpp", "matmul_py", reference=MATMUL.replace("RTOL", "1e-4").replace(
        "ATOL", "1e-4"), tests=[{"m": 32, "seed": 1}])
    (item,) = import_problems("reference-kernels", fair, tmp_path / "out").problems
    assert item.status == "converted", item.reason
    assert any("float64 formulation (within the tolerance of it)" in note for note in item.notes), item.notes
    # the catalogue's self-check holds the baseline to the same second formulation
    check = subprocess.run(
        [sys.executable, "-m", "evaluator.problems.selfcheck", "pmpp_matmul_py", "--device", "cpu", "--shapes", "cpu"],
        cwd=REPO, env={**os.environ, IMPORTED_DIR_ENV: str(tmp_path / "out")}, capture_output=True, text=True,
        timeout=300, check=False)
    assert check.returncode == 0, check.stderr
    assert '"independent"' in check.stdout
