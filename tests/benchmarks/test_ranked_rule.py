"""benchmarks/ranked_rule.py: the ranked-figure rule replayed on the recorded H200 runner jobs gives the
figures docs/security.md cites ("The ranked figure")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "ranked_rule.py"


def replay(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_replay_on_the_record_gives_the_figures_the_security_doc_cites() -> None:
    out = replay("--until", "2026-12-05")  # the sessions the doc cites, before the native examples' round
    assert "1339 honest ranked shapes" in out
    assert "ranked more than 1.0% above their own median: 107" in out
    assert "ranked more than 10.0% above their own median: 13" in out and "largest: 27.8%" in out
    assert (
        "one kernel call, >= 20 us (181 shapes): a claim rewritten to 0.91 x gains > 1% on 78, median 0.67%"
        in out
    )
    assert "every call, >= 20 us (1250 shapes)" in out


def test_the_window_selects_the_sources_by_date() -> None:
    later = replay("--since", "2026-12-04")
    shapes = int(later.split(" honest ranked shapes", 1)[0])
    assert 0 < shapes < 1339
