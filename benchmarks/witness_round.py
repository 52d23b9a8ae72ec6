"""The integrity round on a GPU host: the judge and the timing witness over the whole catalogue.

    SOLBOARD_COMMIT=$(git rev-parse HEAD) python3 benchmarks/witness_round.py --out DIR [--runs 2]

Sections (each bounded in time; a failing one is recorded and the round goes on):
  smoke     vector_add's example, ranked, with ncu's raw output kept (the path works at all)
  honest    every example (Python for all problems, PTX and CUDA) ranked on the ranked shapes,
            ``--runs`` times each: per shape the reported median, the witness, its floor, the
            judge's clock; false rejections (an honest shape not confirmed) and the largest honest
            gap; witness seconds per ranked shape
  cheats    forged timings (class 16), host work (14), side streams (1), persisting L2 (11), less
            work when timed (9): none may pass or rank
  gputests  pytest -m gpu
Writes summary.json (the figures) and honest.json / cheats.json (per run) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: gpu_round beside it

from gpu_round import NATIVE, PROBLEMS, baseline_file, evaluate, provenance, run

CHEATS = [
    ("vector_add", "tests/fixtures/cheats/c16_forge_near_light.py"),
    ("vector_add", "tests/fixtures/cheats/c16_patch_json_encoder.py"),
    ("vector_add", "tests/fixtures/cheats/c16_early_ready.py"),
    ("vector_add", "tests/fixtures/cheats/c14_host_work.py"),
    ("vector_add", "tests/fixtures/cheats/c01_side_stream.py"),
    ("vector_add", "tests/fixtures/cheats/c11_persisting_l2.py"),
    ("vector_add", "tests/fixtures/cheats/c09_less_work_when_timed.py"),
    ("vector_add", "tests/fixtures/cheats/c16_hide_from_witness.py"),
    ("vector_add", "tests/fixtures/cheats/c16_witness_off_gpu.py"),
    ("vector_add", "tests/fixtures/cheats/c16_witness_pipe_inject.py"),
]


def witness_line(shape: dict[str, Any]) -> dict[str, Any]:
    timing, witness = shape.get("timing") or {}, shape.get("witness") or {}
    reported, witnessed = timing.get("median_us"), witness.get("median_us")
    line = {
        "shape": shape["shape_id"],
        "ranked": shape["ranked"],
        "status": shape["status"],
        "message": (shape.get("message") or "")[:240],
        "reported_us": reported,
        "witness_us": witnessed,
        "floor_us": witness.get("floor_us"),
        "confirmed": witness.get("confirmed"),
        "kernels": witness.get("kernels_per_call"),
        "witnessed_calls": witness.get("n"),
        "round_trip_us": witness.get("judge_round_trip_us"),
        "gate_us": timing.get("gate_us"),
        "score": (shape.get("sol") or {}).get("score"),
        # How the class-14 rule decided: which clock ranked, and whether the events were measured
        # again behind a longer gate or side by side with the spans before any flag.
        "ranked_source": timing.get("ranked_source"),
        "disagreement_rel": timing.get("disagreement_rel"),
        "gate_retried": timing.get("gate_retried"),
        "events_remeasured": timing.get("events_remeasured"),
    }
    if reported and witnessed:
        line["gap_us"] = reported - witnessed
        line["gap_rel"] = (reported - witnessed) / witnessed
    if reported and line["round_trip_us"] is not None:
        line["hidden_us"] = line["round_trip_us"] - (line["gate_us"] or 0.0) - reported
    return line


def brief(result: dict[str, Any]) -> dict[str, Any]:
    report = result.get("report") or {}
    shapes = [witness_line(shape) for shape in report.get("shapes", [])]
    phases = report.get("phase_seconds") or {}
    ranked = sum(1 for shape in report.get("shapes", []) if shape["ranked"])
    return {
        "problem": result.get("problem"), "file": result.get("file"), "status": result.get("status"),
        "message": (result.get("message") or "")[:400], "rank_eligible": result.get("rank_eligible"),
        "witnessed": report.get("witnessed"), "problem_score": result.get("problem_score"),
        "seconds": result.get("seconds"), "phases": phases, "notes": (report.get("notes") or [])[:12],
        "witness_s_per_ranked_shape": (phases.get("witness", 0.0) / ranked) if ranked else None,
        "shapes": shapes, "error": result.get("error"),
    }


def section_smoke(out: Path) -> dict[str, Any]:
    dump = out / "ncu_raw"
    dump.mkdir(exist_ok=True)
    os.environ["SOLBOARD_WITNESS_DUMP"] = str(dump)
    try:
        result = evaluate(
            "vector_add", "examples/python/vector_add.py", ["--mode", "ranked", "--shapes", "ranked"], 400
        )
    finally:
        os.environ.pop("SOLBOARD_WITNESS_DUMP", None)
    return {**brief(result), "stderr": (result.get("error") or "")[-3000:]}


def honest_files() -> list[tuple[str, str, list[str]]]:
    files = [(problem, path, ["--language", language]) for problem, path, language in NATIVE]
    files += [(problem, f"examples/python/{problem}.py", []) for problem in PROBLEMS]
    # The baseline itself as a submission: its score must be ~0.5 (the judge times the baseline).
    files += [(problem, f"baseline:{problem}", []) for problem in PROBLEMS]
    return files


def section_honest(runs: int, deadline: float, only: str | None = None,
                   out: Path | None = None) -> list[dict[str, Any]]:
    """Each evaluation is written as soon as it ends: a call killed at its limit keeps the rest."""
    results: list[dict[str, Any]] = []
    for attempt in range(runs):
        for problem, path, extra in honest_files():
            if only and problem not in only.split(",") and path not in only.split(","):
                continue
            if time.monotonic() > deadline:
                results.append({"problem": problem, "file": path, "error": "round time budget spent"})
                continue
            target = baseline_file(problem) if path.startswith("baseline:") else path
            result = evaluate(problem, target, ["--mode", "ranked", "--shapes", "ranked", *extra], 500)
            result["file"] = path
            results.append({"run": attempt, **brief(result)})
            if out is not None:
                (out / "honest.json").write_text(json.dumps(results, indent=1))
    return results


def honest_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    lines = [line for result in results for line in result.get("shapes", []) if line.get("witness_us")]
    rejected = [line for line in lines if line.get("confirmed") is False]
    gaps = [line["gap_rel"] for line in lines if "gap_rel" in line]
    hidden = [line["hidden_us"] for line in lines if "hidden_us" in line]
    per_shape = [r["witness_s_per_ranked_shape"] for r in results if r.get("witness_s_per_ranked_shape")]
    return {
        "evaluations": len(results), "witnessed_shapes": len(lines),
        "not_confirmed": len(rejected), "not_confirmed_lines": rejected[:20],
        "statuses": {r["file"] + f"#{r.get('run')}": r.get("status") for r in results},
        "rank_eligible": sum(1 for r in results if r.get("rank_eligible")),
        "gap_rel_min": min(gaps, default=None), "gap_rel_median": statistics.median(gaps) if gaps else None,
        "gap_rel_max": max(gaps, default=None),
        "gap_us_min": min((line["gap_us"] for line in lines if "gap_us" in line), default=None),
        "hidden_us_max": max(hidden, default=None),
        "hidden_us_median": statistics.median(hidden) if hidden else None,
        "witness_s_per_ranked_shape_mean": statistics.fmean(per_shape) if per_shape else None,
    }


def section_cheats() -> list[dict[str, Any]]:
    return [brief(evaluate(problem, path, ["--mode", "ranked", "--shapes", "ranked"], 400))
            for problem, path in CHEATS]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--sections", default="smoke,honest,cheats,gputests")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument(
        "--only", default=None, help="comma-separated problems or files of the honest section"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    sections = args.sections.split(",")
    summary: dict[str, Any] = {"provenance": provenance()}
    if "smoke" in sections:
        summary["smoke"] = section_smoke(args.out)
    if "cheats" in sections and time.monotonic() < deadline - 120:
        cheats = section_cheats()
        (args.out / "cheats.json").write_text(json.dumps(cheats, indent=1))
        summary["cheats"] = [
            {k: c[k] for k in ("file", "status", "message", "rank_eligible")} for c in cheats
        ]
    if "honest" in sections:
        honest = section_honest(args.runs, deadline - 60, args.only, args.out)
        summary["honest"] = honest_summary(honest)
    if "gputests" in sections and time.monotonic() < deadline - 30:
        tests = run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"],
                    max(deadline - time.monotonic(), 30))
        summary["gputests"] = {"rc": tests["rc"], "tail": (tests["stdout"] + tests["stderr"])[-3000:]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary.get("smoke", {}), indent=1, default=str)[:3000])
    print(json.dumps(summary.get("honest", {}), indent=1, default=str)[:3000])
    print(json.dumps(summary.get("cheats", []), indent=1, default=str)[:2000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
