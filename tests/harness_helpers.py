"""Shared helpers of the harness tests: run the real CLI on a fixture and parse its JSON report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CHEATS = FIXTURES / "cheats"
GOOD = FIXTURES / "good"


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def run_cli(*args: str, stdin: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evaluator", *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def evaluate_file(problem: str, path: Path, *extra: str, stdin: str | None = None) -> dict[str, Any]:
    """The JSON report of ``python -m evaluator run PROBLEM PATH --json EXTRA...`` (exit 0 asserted)."""
    result = run_cli("run", problem, str(path), "--json", *extra, stdin=stdin)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def timed_result(timing: dict[str, Any], round_trip_low_us: float | None = None) -> Any:
    """A passed shape's result as the judge holds it after the timing: the child's statistics and the
    judge's clock (its 10th percentile ``round_trip_low_us``), for the witness's arithmetic."""
    from evaluator.harness.outcome import JudgeClock, ShapeResult
    from evaluator.vocabulary import Status

    clock = JudgeClock(
        round_trip_us=round_trip_low_us,
        round_trip_low_us=round_trip_low_us,
        round_trips_us=[],
        calls=30,
        checked_calls=3,
    )
    return ShapeResult(shape_id="s", axes={}, ranked=True, status=Status.PASSED, timing=timing, clock=clock)
