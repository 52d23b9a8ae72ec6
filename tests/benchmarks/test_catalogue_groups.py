"""benchmarks/catalogue_groups.py: the catalogue in groups of about equal recorded GPU time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import catalogue_groups
from evaluator.problems import load_catalogue

REPO = Path(__file__).resolve().parents[2]


def test_groups_cover_every_name_once_and_place_the_heaviest_apart() -> None:
    seconds = {"a": 300.0, "b": 200.0, "c": 100.0, "d": 100.0, "e": 90.0}
    placed = catalogue_groups.groups(["e", "d", "c", "b", "a", "f"], seconds, 3)
    assert sorted(name for group in placed for name in group) == ["a", "b", "c", "d", "e", "f"]
    assert placed == [["a"], ["b", "e"], ["c", "d", "f"]]  # f: unseen, counted as UNSEEN_S


def test_the_recorded_catalogue_splits_into_six_calls_of_a_device_session() -> None:
    single = sorted(name for name, problem in load_catalogue().items() if problem.kind == "single")
    seconds = catalogue_groups.recorded_seconds()
    placed = catalogue_groups.groups(single, seconds, 6)
    loads = [sum(seconds.get(name, catalogue_groups.UNSEEN_S) for name in group) for group in placed]
    assert sorted(name for group in placed for name in group) == single
    assert max(loads) < 480  # each fits one 10-minute call's runner jobs (560 s less their margin)


@pytest.mark.parametrize(("argument", "code"), [("2/6", 0), ("7/6", 2), ("x", 2)])
def test_the_script_prints_one_group_or_refuses_a_bad_argument(argument: str, code: int) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "catalogue_groups.py"), argument],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == code, done.stderr
    assert (done.stdout.count(",") >= 2) == (code == 0)
