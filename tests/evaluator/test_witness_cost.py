"""benchmarks/witness_cost.py: the catalogue's witness cost from recorded runner jobs (issue 9)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "witness_cost.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("witness_cost", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def job(problem: str, phases: dict[str, float], witnessed: int, unwitnessed: int = 0) -> dict[str, Any]:
    shapes = [{"ranked": True, "witness_us": 10.0}] * witnessed + [
        {"ranked": True, "witness_us": None}
    ] * unwitnessed
    return {"problem": problem, "submission": "example", "phases": phases, "shapes": shapes}


def write(path: Path, *jobs: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"results": list(jobs)}))
    return path


def test_a_later_file_replaces_a_job_and_an_old_load_is_moved_into_the_test_stage(tmp_path: Path) -> None:
    old = write(
        tmp_path / "old.json",
        job("a", {"witness": 10.0, "witness.load": 3.0, "test": 2.0}, 4),  # 1 s of its load not hidden
        job("b", {"witness": 99.0, "witness.load": 1.0, "test": 5.0}, 4),
    )
    new = write(tmp_path / "new.json", job("b", {"witness": 4.0, "witness.load_wait": 0.0}, 3, unwitnessed=1))
    result = script().summary(script().latest_jobs([old, new]))
    rows = {row["problem"]: row for row in result["rows"]}
    assert rows["a"]["projected"] and rows["a"]["counted_s"] == 8.0  # 10 - 3 + (3 - 2)
    assert not rows["b"]["projected"] and rows["b"]["counted_s"] == 4.0 and rows["b"]["shapes"] == 3
    assert result["shapes"] == 7 and result["measured_s_per_shape"] == round(4.0 / 3, 3)
    assert result["catalogue_s_per_shape"] == round(12.0 / 7, 3) and result["recorded_s_per_shape"] == 2.0


def test_the_script_runs_on_the_recorded_h200_jobs(tmp_path: Path) -> None:
    record = SCRIPT.parent / "results" / "data" / "runner_jobs_h200.json"
    out = tmp_path / "cost.json"
    window = ["--since", "2026-12-02T13", "--until", "2026-12-03T16"]  # up to the early load's first session
    run = subprocess.run([sys.executable, str(SCRIPT), str(record), *window, "--out", str(out)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["jobs"] == 64 and result["measured_jobs"] >= 10
    assert result["catalogue_s_per_shape"] <= result["recorded_s_per_shape"]


def test_a_job_whose_shapes_never_reached_the_witness_is_listed_without_a_figure(tmp_path: Path) -> None:
    # A CPU dry run's jobs: phases, but no ranked shape with a witness.
    unwitnessed = write(
        tmp_path / "cpu.json", job("vector_add", {"witness": 0.5, "witness.load_wait": 0.0}, 0, 2)
    )
    run = subprocess.run([sys.executable, str(SCRIPT), str(unwitnessed)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert "vector_add               example     0 shapes      — s/shape" in run.stdout
