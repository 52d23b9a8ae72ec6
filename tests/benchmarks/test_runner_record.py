"""benchmarks/runner_record.py: runner jobs compacted without losing what the curated tables cite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import runner_record

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "benchmarks" / "results" / "data" / "runner_jobs_h200.json"
WITNESS_COST = REPO / "benchmarks" / "witness_cost.py"


def raw_job(problem: str, status: str = "PASSED", flags: list[str] | None = None) -> dict[str, Any]:
    shape = {
        "shape": "n1048576",
        "ranked": True,
        "status": status,
        "message": "x" * 500,
        "reported_us": 4.2239871,
        "witness_us": 5.150001,
        "floor_us": 1.1,
        "confirmed": True,
        "kernels": 1,
        "witnessed_calls": 2,
        "round_trip_us": 1400.0,
        "gate_us": 1000.0,
        "hidden_us": 334.83199,
        "ranked_source": "device_span",
        "disagreement_rel": 0.02,
        "events_remeasured": False,
    }
    return {
        "problem": problem,
        "submission": "example",
        "run": 0,
        "status": status,
        "witnessed": True,
        "rank_eligible": status == "PASSED",
        "problem_score": 0.50358362,
        "seconds": 37.2,
        "flags": flags or [],
        "message": "all 1 shapes passed",
        "notes": ["long"],
        "sandbox_gaps": "long",
        "phases": {"test": 4.179, "witness": 7.467, "witness.load_wait": 0.0, "child_start_up.imports": 3.6},
        "shapes": [shape],
    }


def write_raw(path: Path, *jobs: dict[str, Any], date: str) -> Path:
    path.write_text(
        json.dumps({"date": date, "commit": "9f062ee", "device": "cuda (h200)", "results": list(jobs)})
    )
    return path


def test_a_job_keeps_its_outcome_witness_and_shape_figures_and_drops_the_bulk() -> None:
    job = runner_record.expand_job(runner_record.compact_job(raw_job("softmax")))
    assert (job["status"], job["score"], job["problem_score"], job["seconds"]) == (
        "PASSED",
        0.5036,
        0.5036,
        37.2,
    )
    assert job["phases"] == {"test": 4.179, "witness": 7.467, "witness.load_wait": 0.0}
    assert job["shapes"] == [{"shape": "n1048576", "ranked": True, "status": "PASSED", "reported_us": 4.224,
                              "witness_us": 5.15, "floor_us": 1.1, "kernels": 1, "witnessed_calls": 2,
                              "hidden_us": 334.8, "ranked_source": None, "events_remeasured": None}]
    assert "message" not in job and "notes" not in job and "sandbox_gaps" not in job


def test_a_failed_or_flagged_job_keeps_why_and_its_shapes_even_when_passes_drop_theirs() -> None:
    rejected = runner_record.compact_job(
        raw_job("c16", status="REJECTED") | {"message": "timing not confirmed"}, shapes="failed"
    )
    flagged = runner_record.compact_job(raw_job("c14", flags=["class 14 " * 40]), shapes="failed")
    clean = runner_record.compact_job(raw_job("softmax"), shapes="failed")
    assert rejected["message"] == "timing not confirmed" and len(rejected["shapes"]) == 1
    assert len(flagged["flags"][0]) == 200 and len(flagged["shapes"]) == 1
    assert "shapes" not in clean


def test_sources_keep_their_order_and_a_label_appended_again_replaces_its_own(tmp_path: Path) -> None:
    first = write_raw(tmp_path / "a.json", raw_job("softmax"), date="2026-12-03T18:11:50+00:00")
    second = write_raw(tmp_path / "b.json", raw_job("rmsnorm"), date="2026-12-04T19:12:42+00:00")
    out = tmp_path / "record.json"
    script = str(REPO / "benchmarks" / "runner_record.py")
    for args in ([f"{first}=r15/a", f"{second}=r16/b"], ["--append", f"{first}=r15/a"]):
        subprocess.run([sys.executable, script, "--out", str(out), *args], check=True, capture_output=True)
    labels = [(label, [job["problem"] for job in jobs])
              for label, jobs in runner_record.sources_of(json.loads(out.read_text()))]
    assert labels == [("r16/b", ["rmsnorm"]), ("r15/a", ["softmax"])]


@pytest.mark.parametrize(("window", "catalogue_s", "measured_jobs"), [
    (["--until", "2026-12-03T13"], 1.041, 0),  # the latest of each job before the early witness load
    (["--until", "2026-12-03T16"], 0.835, 10),  # the ten costliest measured again under it
    (["--until", "2026-12-03T19"], 0.765, 58),
    (["--until", "2026-12-05"], 0.713, 64),  # every job under the early load (the catalogue's sessions)
])
def test_the_record_gives_the_witness_costs_the_docs_cite(
    tmp_path: Path, window: list[str], catalogue_s: float, measured_jobs: int
) -> None:
    out = tmp_path / "cost.json"
    subprocess.run([sys.executable, str(WITNESS_COST), str(RECORD), "--since", "2026-12-02T13", *window,
                    "--out", str(out)], check=True, capture_output=True, timeout=60)
    result = json.loads(out.read_text())
    assert (result["jobs"], result["catalogue_s_per_shape"], result["measured_jobs"]) == (64, catalogue_s,
                                                                                         measured_jobs)


def test_no_honest_shape_of_the_record_was_reported_below_its_floor_and_the_closest_is_the_one_cited() -> (
    None
):
    margins = []
    for _, jobs in runner_record.sources_of(json.loads(RECORD.read_text())):
        for job in jobs:
            if str(job["submission"]).startswith("cheat"):
                continue
            margins += [
                (
                    (shape["reported_us"] - shape["floor_us"]) / shape["witness_us"],
                    job["problem"],
                    shape["shape"],
                )
                for shape in job.get("shapes") or []
                if shape["ranked"]
                and shape.get("witness_us")
                and shape.get("floor_us") is not None
                and shape.get("reported_us") is not None
            ]
    closest = min(margins)
    assert len(margins) == 1728 and closest[0] > 0  # benchmarks/results/witness.md, "Honest gaps and floors"
    assert closest[1:] == ("layernorm", "t128_h7168") and round(closest[0], 3) == 0.043
