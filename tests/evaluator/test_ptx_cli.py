"""`python -m evaluator check-ptx`: the site's upload validation, from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.ptx.toolchain import find_tool

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")


def check_ptx(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "evaluator", "check-ptx", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_it_prints_the_validation_as_json() -> None:
    done = check_ptx(
        "examples/ptx/gemm_bf16_wgmma_tma.ptx", "--arch", "sm_90a", "--problem", "gemm_bf16", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    arch = result["archs"][0]
    assert result["ok"] and arch["entry"] == "gemm_bf16_wgmma_tma"
    assert arch["evidence"]["missing"] == [] and arch["kernels"][0]["registers"] > 0


def test_without_a_launch_spec_it_still_assembles_and_warns(tmp_path: Path) -> None:
    source = tmp_path / "bare.ptx"
    source.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n"
                      ".visible .entry add(.param .u64 a) { ret; }\n")
    done = check_ptx(str(source), "--arch", "sm_90a", "--json")
    result = json.loads(done.stdout)
    assert result["ok"], result["errors"]
    assert "no launch spec" in result["warnings"][0]["message"]
    assert result["archs"][0]["kernels"][0]["name"] == "add"
    assert result["archs"][0]["kernels"][0]["registers"] is not None


def test_a_refused_file_still_exits_zero_with_ok_false(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text((ROOT / "examples/ptx/vector_add.ptx").read_text().replace("ret;", "retx;"))
    done = check_ptx(str(bad), "--problem", "vector_add", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["ok"] is False


def test_the_text_report_names_families_and_missing_features() -> None:
    done = check_ptx("examples/ptx/gemm_bf16_mma.ptx", "--problem", "gemm_bf16")
    assert done.returncode == 0
    assert "mma.sync" in done.stdout and "missing: wgmma, tma" in done.stdout


def test_a_spec_file_replaces_the_comment_block(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('entry = "nope"\ngrid = [1]\nblock = [32]\nparams = []\n')
    done = check_ptx("examples/ptx/vector_add.ptx", "--spec", str(spec), "--json")
    assert "entry 'nope' not found" in done.stdout


def test_an_unreadable_file_exits_two() -> None:
    assert check_ptx("does/not/exist.ptx").returncode == 2


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_check_ptx_takes_a_newly_native_problem_and_names_its_f32_constant(tmp_path: Path) -> None:
    """check-ptx is the site's validation: a CUDA example of a problem that took Python only before
    (rmsnorm, eps passed as an f32 constant) checks out on both targets."""
    done = check_ptx(
        "examples/cuda/rmsnorm.cu", "--arch", "sm_90a", "--arch", "sm_100a", "--problem", "rmsnorm", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"], result
    assert result["spec"]["params"][-1] == {"kind": "f32", "constant": "eps"}
    assert [arch["arch"] for arch in result["archs"]] == ["sm_90a", "sm_100a"]
