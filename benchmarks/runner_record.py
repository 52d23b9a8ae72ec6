"""The compact record of runner jobs: what benchmarks/false_positives.py found, without its bulk.

A run of ``false_positives.py`` writes every job's report: messages, notes, sandbox text, logs and
every phase, about 1 KB a shape. The record keeps what the curated tables cite (benchmarks/results/
false_positives.md, witness.md, host_work_clock.md): per job its outcome, score, duration and the
witness's phases; per ranked shape its status, reported and witnessed medians, floor, kernels,
witnessed calls and hidden host time. Each source file becomes one entry, labelled and in the order
given, with the commit, date and device its run named (a later entry's job replaces an earlier one
of the same problem and submission in ``benchmarks/witness_cost.py``).

    python3 benchmarks/runner_record.py --out record.json OUT/runner_baselines.json=2026-12-04/recheck ...
    python3 benchmarks/runner_record.py --out record.json --append OUT/runner_cheats.json=2026-12-10/cheats
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: The job fields kept as they are.
JOB_FIELDS = ("problem", "submission", "run", "outcome", "status", "witnessed", "rank_eligible", "seconds",
              "flags", "false_positive", "caught", "skipped")
#: The phases the witness-cost tables read (seconds): the stages and the witness's split.
PHASES = ("test", "ranked", "witness", "witness.load", "witness.load_wait", "witness.calls")
#: One row per shape, in this order: a list per shape instead of a mapping saves most of the bytes.
#: ``ranked_source`` and ``events_remeasured`` are kept only where they say something (events ranked,
#: a second look made): null otherwise.
SHAPE_COLUMNS = ("shape", "ranked", "status", "reported_us", "witness_us", "floor_us", "kernels",
                 "witnessed_calls", "hidden_us", "ranked_source", "events_remeasured")


def rounded(value: Any) -> Any:
    """Four significant figures are more than any table quotes; a float is the bulk of the bytes."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def compact_job(job: Mapping[str, Any], shapes: str = "all") -> dict[str, Any]:
    """``shapes``: "all" keeps every shape's row; "failed" only those of a job that did not pass
    cleanly (the CPU runs, whose per-shape figures say nothing of a GPU)."""
    kept: dict[str, Any] = {key: rounded(job[key]) for key in JOB_FIELDS if key in job}
    if job.get("problem_score") is not None:
        kept["score"] = rounded(job["problem_score"])
    if job.get("status") not in (None, "PASSED") or job.get("flags"):
        kept["message"] = str(job.get("message", ""))[:300]  # why it failed; a pass says nothing more
    phases = job.get("phases") or {}
    if phases:
        kept["phases"] = {name: rounded(phases[name]) for name in PHASES if name in phases}
    if job.get("flags"):
        kept["flags"] = [str(flag)[:200] for flag in job["flags"]]
    clean = job.get("status") == "PASSED" and not job.get("flags")
    if job.get("shapes") and (shapes == "all" or not clean):
        kept["shapes"] = [shape_row(shape) for shape in job["shapes"]]
    return kept


def shape_row(shape: Mapping[str, Any]) -> list[Any]:
    notable = {
        "ranked_source": shape.get("ranked_source") if shape.get("ranked_source") == "events" else None,
        "events_remeasured": True if shape.get("events_remeasured") else None,
    }
    return [notable[column] if column in notable else rounded(shape.get(column)) for column in SHAPE_COLUMNS]


def expand_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A compact job with its shapes as mappings again (what readers of the raw files expect)."""
    shapes = [dict(zip(SHAPE_COLUMNS, row, strict=True)) for row in job.get("shapes", [])]
    return {**job, "shapes": shapes, "problem_score": job.get("score")}


def source_entry(path: Path, label: str, shapes: str = "all") -> dict[str, Any]:
    raw = json.loads(path.read_text())
    return {"label": label, "file": path.name, "commit": raw.get("commit"), "date": raw.get("date"),
            "device": raw.get("device"), "host": raw.get("host"),
            "jobs": [compact_job(job, shapes) for job in raw.get("results", [])]}


def record_of(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    entries = list(entries)
    return {"what": "runner jobs of benchmarks/false_positives.py, compacted by benchmarks/runner_record.py",
            "shape_columns": list(SHAPE_COLUMNS), "sources": entries}


def sources_of(record: Mapping[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each source's label and its jobs, expanded, in the record's order."""
    return [(source["label"], [expand_job(job) for job in source["jobs"]]) for source in record["sources"]]


def parse_pair(text: str) -> tuple[Path, str]:
    path, _, label = text.partition("=")
    return Path(path), label or Path(path).stem


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+", help="FILE=LABEL: a false_positives.py output and its label")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--append", action="store_true", help="add to the record at --out (a label replaces its own)"
    )
    parser.add_argument("--shapes", choices=("all", "failed"), default="all",
                        help="failed: keep shape rows only for jobs that did not pass cleanly")
    args = parser.parse_args()
    entries = json.loads(args.out.read_text())["sources"] if args.append and args.out.exists() else []
    for path, label in map(parse_pair, args.files):
        entries = [entry for entry in entries if entry["label"] != label] + [
            source_entry(path, label, args.shapes)
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(record_of(entries), separators=(",", ":")).replace('{"label"', '\n{"label"') + "\n"
    )
    print(f"{args.out}: {len(entries)} sources, {sum(len(e['jobs']) for e in entries)} jobs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
