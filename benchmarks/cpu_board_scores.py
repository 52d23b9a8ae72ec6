"""What the CPU development board scores a submission, run after run, through the CPU runner.

    python benchmarks/cpu_board_scores.py --runs 10 --out /tmp/cpu_board_scores.json
    python benchmarks/cpu_board_scores.py --file tests/fixtures/good/torch_compile_add.py --runs 2 --out ...

Each run is a ranked runner job on the CPU device (``runners.execute.run``: the runner's own path,
in its jail) of one vector_add submission, by default ``examples/python/vector_add.py``, which is the
problem's baseline byte for byte: its score must be 0.5 within the run-to-run spread. The score is
the site's for the CPU board: the geometric mean over the CPU shapes of t_b / (t_b + t_k), on the
ranked times (``evaluator.scoring.ranked_time``, the function the site calls). The file is rewritten
after each run, with the commit, the date and the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.problems import get_problem
from evaluator.report import EvaluationReport
from evaluator.scoring import problem_score, ranked_time, shape_score
from runners import execute
from runners.slots import StateDir

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: false_positives beside it
from false_positives import job_for, slot_for

REPO = Path(__file__).resolve().parent.parent


def board_score(report: EvaluationReport) -> tuple[float | None, list[dict[str, Any]]]:
    """The CPU board's score of ``report`` (None unless every shape passed with ranked times)."""
    shapes, scores = [], []
    for shape in report.shapes:
        times = ranked_time(shape) if shape.status.value == "PASSED" else None
        line: dict[str, Any] = {"shape": shape.shape_id, "status": shape.status.value}
        if times is not None and shape.timing and shape.baseline_timing:
            score = shape_score(times.kernel_us * 1e-6, times.baseline_us * 1e-6, 0.0)
            scores.append(score)
            line.update(claim_us=shape.timing.median_us, baseline_claim_us=shape.baseline_timing.median_us,
                        kernel_us=times.kernel_us, baseline_us=times.baseline_us, raised=times.raised,
                        score=score, judge_us=shape.witness.median_us if shape.witness else None,
                        judge_baseline_us=shape.witness.baseline_us if shape.witness else None,
                        overhead_us=shape.witness.overhead_us if shape.witness else None)
        shapes.append(line)
    complete = len(scores) == len(report.shapes) and scores
    return (problem_score(scores) if complete else None), shapes


def run(path: Path) -> dict[str, Any]:
    job = job_for("vector_add", get_problem("vector_add").version, "python", path.read_text(), "cpu")
    folder = Path(tempfile.mkdtemp(prefix="solboard-board-", dir="/tmp"))
    os.chmod(folder, 0o755)
    ctx = execute.Context(
        node="board",
        slot=slot_for("cpu", "cpu"),
        state=StateDir(folder / "state"),
        user=None,
        calibration=None,
    )
    began = time.monotonic()
    try:
        result = execute.run(job, ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    line: dict[str, Any] = {"outcome": result.outcome, "seconds": round(time.monotonic() - began, 1)}
    if result.report is None:
        return {**line, "message": result.message[:300]}
    score, shapes = board_score(result.report)
    return {**line, "status": result.report.status.value, "message": result.report.message[:300],
            "score": score, "shapes": shapes}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", type=Path, default=REPO / "examples" / "python" / "vector_add.py")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=False).stdout.strip()
    summary: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "host": platform.node(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, shared with other work",
        "device": "cpu runner",
        "submission": str(args.file.resolve().relative_to(REPO))
        if args.file.resolve().is_relative_to(REPO)
        else str(args.file),
        "runs": [],
    }
    for index in range(args.runs):
        summary["runs"].append({"run": index, **run(args.file)})
        scores = [r["score"] for r in summary["runs"] if r.get("score") is not None]
        summary.update(scores=[round(s, 4) for s in scores],
                       median_score=statistics.median(scores) if scores else None,
                       spread=(min(scores), max(scores)) if scores else None)
        print(json.dumps({k: v for k, v in summary["runs"][-1].items() if k != "shapes"}), flush=True)
        args.out.write_text(json.dumps(summary, indent=1, default=str))
    median = summary.get("median_score")
    print(f"median score {median:.3f} over {len(summary['scores'])} runs" if median is not None and
          not math.isnan(median) else "no score")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
