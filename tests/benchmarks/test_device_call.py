"""benchmarks/device_call.sh: one device call of declared parts, dry-run on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "benchmarks" / "device_call.sh"


def call(
    tmp_path: Path, parts: str, *assignments: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "DEVICE": "cpu",
        "PYTHON": sys.executable,
        "TAG": "dry",
    }
    return subprocess.run(["bash", str(DRIVER), parts, *assignments], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_the_driver_parses() -> None:
    assert subprocess.run(["bash", "-n", str(DRIVER)], capture_output=True, check=False).returncode == 0


def test_a_dry_run_self_checks_skips_what_needs_a_gpu_and_writes_only_under_out(tmp_path: Path) -> None:
    done = call(tmp_path, "selfcheck,gputests,quality,witnesscost", "PROBLEMS=vector_add", "KERNELS=1")
    assert done.returncode == 0, done.stderr
    results = tmp_path / "out" / "dry"
    parts = (results / "parts.txt").read_text()
    assert "selfcheck rc=0" in parts
    assert "gputests: skipped (needs a GPU; DEVICE=cpu)" in parts and "quality: skipped" in parts
    assert "PASS" in (results / "selfcheck.txt").read_text()
    assert "PASS" in (results / "selfcheck_examples.txt").read_text()  # the example's kernel too
    env = (results / "env.txt").read_text()
    assert "parts selfcheck,gputests,quality,witnesscost" in env and "PROBLEMS=vector_add" in env
    assert not list(tmp_path.glob("out/*.tgz"))  # a dry run is left unpacked


def test_a_part_the_budget_cannot_hold_is_named_as_skipped_and_an_unknown_one_as_unknown(
    tmp_path: Path,
) -> None:
    done = call(tmp_path, "jobs,nonsense", "PROBLEMS=vector_add", "BUDGET=100")
    parts = (tmp_path / "out" / "dry" / "parts.txt").read_text()
    assert "jobs: skipped (budget" in parts and "unknown part nonsense" in parts
    assert not (tmp_path / "out" / "dry" / "runner_jobs.json").exists()
    assert done.returncode == 0


def test_parameters_must_be_assignments(tmp_path: Path) -> None:
    done = call(tmp_path, "selfcheck", "vector_add")
    assert done.returncode == 2 and "not NAME=VALUE: vector_add" in done.stderr


@pytest.mark.parametrize("part", ["jobs", "cheats"])
def test_runner_jobs_parts_write_false_positives_results(tmp_path: Path, part: str) -> None:
    extra = (
        ["FP_ARGS=--no-job-user"] if os.geteuid() == 0 else []
    )  # the venv may be out of a job user's reach
    done = call(tmp_path, part, "PROBLEMS=vector_add", "CHEATS=c16_early_ready", *extra, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out" / "dry" / f"runner_{part}.json").read_text())
    statuses = {job["submission"]: job["status"] for job in result["results"]}
    if part == "jobs":
        assert statuses == {"example": "PASSED", "baseline": "PASSED"} and result["false_positives"] == 0
    else:
        assert statuses == {"cheat:c16_early_ready": "REJECTED"} and result["cheats_caught"] == 1


def test_the_gpu_checks_of_the_later_issues_are_parts_that_a_dry_run_names_as_skipped(tmp_path: Path) -> None:
    done = call(tmp_path, "harness,jailproof,imports", "HARNESS=limits,ranked")
    assert done.returncode == 0, done.stderr
    parts = (tmp_path / "out" / "dry" / "parts.txt").read_text()
    for part in ("harness", "jailproof", "imports"):
        assert f"{part}: skipped (needs a GPU; DEVICE=cpu)" in parts
    assert "unknown part" not in parts


def test_the_natives_part_runs_the_native_examples_preflight_and_says_why_the_cpu_cannot_run_them(
        tmp_path: Path) -> None:
    done = call(tmp_path, "natives", "NATIVES=older")
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "out" / "dry" / "natives" / "native_older" / "summary.txt").read_text()
    assert "vector_add_ptx             ok" in summary and "gemm_bf16_wgmma_tma        ok" in summary
    assert "ptx submissions need a GPU" in summary
    assert "natives_older rc=0" in (tmp_path / "out" / "dry" / "parts.txt").read_text()


def test_a_group_of_the_catalogue_is_expanded_before_the_call_records_its_parameters(tmp_path: Path) -> None:
    done = call(tmp_path, "gputests", "PROBLEMS=@6/6", "BASELINES=@1/6")
    assert done.returncode == 0, done.stderr
    env = (tmp_path / "out" / "dry" / "env.txt").read_text()
    problems = next(line for line in env.splitlines() if line.startswith("PROBLEMS=")).removeprefix(
        "PROBLEMS="
    )
    baselines = next(line for line in env.splitlines() if line.startswith("BASELINES=")).removeprefix(
        "BASELINES="
    )
    assert problems and baselines and not set(problems.split(",")) & set(baselines.split(","))
    assert "@" not in problems + baselines
