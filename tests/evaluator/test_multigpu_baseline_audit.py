"""The multi-GPU baseline audit (issue 16) on the CPU: benchmarks/multigpu_baseline_audit.py runs the
multi-GPU baselines and their candidates in a real gloo group of two processes, and every candidate
that runs on the CPU passes the problem's tolerance on every CPU shape and distribution. The
timings need two GPUs (benchmarks/results/baseline_audit.md, "What needs the H200 next")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from benchmarks import multigpu_baseline_audit as audit
from evaluator.harness.multi.rank_context import join_group
from evaluator.problems import get_problem

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "multigpu_baseline_audit.py"


def test_the_audit_runs_every_cpu_variant_in_a_gloo_group_and_each_passes(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--world-size", "2", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    expected = {(name, shape.shape_id, variant)
                for name in audit.DEFAULT_PROBLEMS
                for shape in get_problem(name).select_shapes("all", "cpu")
                for variant in audit.variants_for(name, "cpu")}
    assert {(row["problem"], row["shape"], row["variant"]) for row in rows} == expected
    assert any(variant.startswith("candidate:") for _, _, variant in expected)
    for row in rows:
        problem = get_problem(row["problem"])
        assert "error" not in row, row
        assert set(row["margins"]) == set(problem.distributions), row["variant"]
        for outputs in row["margins"].values():
            assert all(o["matched"] >= o["required"] and o["margin"] < 1 for o in outputs.values()), row


def test_a_variant_that_raises_is_recorded_not_fatal(tmp_path: Path) -> None:
    """run_variant returns the error (every rank learns of it) and None for one that runs."""
    ctx = join_group("cpu", str(tmp_path / "store"), 0, 1)
    try:
        def broken(ctx: object, x: torch.Tensor) -> None:
            raise RuntimeError("cuDNN refused these inputs")

        assert audit.run_variant(ctx, broken, (torch.zeros(1),)) == "RuntimeError: cuDNN refused these inputs"
        assert audit.run_variant(ctx, lambda ctx, x: None, (torch.zeros(1),)) is None
    finally:
        dist.destroy_process_group()


def test_only_a_failing_current_baseline_fails_the_run() -> None:
    passing = {"normal": {"y": {"matched": 1.0, "required": 1.0}}}
    failing = {"normal": {"y": {"matched": 0.5, "required": 1.0}}}
    rows = [{"variant": "current", "margins": passing}, {"variant": "candidate:x", "margins": failing},
            {"variant": "candidate:y", "margins": {}, "error": "RuntimeError"}]
    assert audit.failed_rows(rows) == []
    assert audit.failed_rows([{"variant": "current", "margins": failing}]) == [{"variant": "current",
                                                                              "margins": failing}]
