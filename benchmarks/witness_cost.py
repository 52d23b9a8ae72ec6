"""The witness's cost per ranked shape over the catalogue, from recorded runner jobs.

Takes the results of ``benchmarks/false_positives.py`` (``runner_*.json``) or a compact record of them
(``benchmarks/runner_record.py``; its sources in order, ``--since``/``--until`` keep those run in a
window), in the order given: a later job replaces an earlier one of the same problem and submission.
Over the latest job of every problem's baseline and example it reports the witness's seconds per
ranked shape:

- ``measured``: each job's own ``witness`` phase (since bb5909a it holds the early load's wait);
- ``projected``: jobs recorded before the early load (no ``witness.load_wait`` phase) counted as if
  their load had started with the test stage: ``witness - load + max(0, load - test)``. Their
  shapes keep three witnessed calls: a projection (an overestimate where the two-call rule would
  apply), until those jobs run again.

    python3 benchmarks/witness_cost.py benchmarks/results/data/runner_jobs_h200.json --since 2026-12-02T13
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: runner_record beside it

from runner_record import sources_of


def job_lists(path: Path, since: str = "", until: str = "") -> list[tuple[str, list[dict[str, Any]]]]:
    """(where, jobs) of a raw runner file, or of each source of a compact record run in [since, until]."""
    data = json.loads(path.read_text())
    if "sources" not in data:
        return [(str(path), data.get("results", []))]
    dates = {source["label"]: source.get("date") or "" for source in data["sources"]}
    return [(f"{path}#{label}", jobs) for label, jobs in sources_of(data)
            if since <= dates[label] and (not until or dates[label] <= until)]


def latest_jobs(files: list[Path], since: str = "", until: str = "") -> dict[tuple[str, str], dict[str, Any]]:
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    for path in files:
        for where, results in job_lists(path, since, until):
            for job in results:
                if job.get("submission") in ("baseline", "example") and job.get("phases"):
                    jobs[(job["problem"], job["submission"])] = {**job, "file": where}
    return jobs


def witnessed_shapes(job: dict[str, Any]) -> int:
    """Ranked shapes that reached the witness (a shape that failed its test stage never does)."""
    return sum(1 for shape in job["shapes"] if shape.get("ranked") and shape.get("witness_us") is not None)


def projected_seconds(job: dict[str, Any]) -> tuple[float, bool]:
    phases = job["phases"]
    if "witness.load_wait" in phases:
        return phases["witness"], False
    load = phases.get("witness.load", 0.0)
    return phases["witness"] - load + max(0.0, load - phases.get("test", 0.0)), True


def median(values: list[float]) -> float | None:
    """None where no job reached the witness (a CPU dry run, a call cut before its first shape)."""
    return statistics.median(values) if values else None


def summary(jobs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for (problem, submission), job in sorted(jobs.items()):
        shapes = witnessed_shapes(job)
        seconds, projected = projected_seconds(job)
        rows.append({"problem": problem, "submission": submission, "shapes": shapes,
                     "witness_s": round(job["phases"]["witness"], 3), "counted_s": round(seconds, 3),
                     "projected": projected, "s_per_shape": round(seconds / shapes, 3) if shapes else None,
                     "file": job["file"]})
    shapes = sum(row["shapes"] for row in rows)
    measured = [row for row in rows if not row["projected"]]

    def mean(selected: list[dict[str, Any]], key: str) -> float | None:
        count = sum(row["shapes"] for row in selected)
        return round(sum(row[key] for row in selected) / count, 3) if count else None

    return {
        "jobs": len(rows), "shapes": shapes, "measured_jobs": len(measured),
        "recorded_s_per_shape": mean(rows, "witness_s"),
        "measured_s_per_shape": mean(measured, "counted_s"),
        "catalogue_s_per_shape": mean(rows, "counted_s"),
        "median_job_s_per_shape": median([row["s_per_shape"] for row in rows if row["s_per_shape"]]),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--since", default="", help="a record's sources run at or after this ISO date")
    parser.add_argument("--until", default="", help="... and at or before this one")
    args = parser.parse_args()
    result = summary(latest_jobs(args.files, args.since, args.until))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    for row in result["rows"]:  # a job none of whose shapes reached the witness has no figure a shape
        per_shape = "     —" if row["s_per_shape"] is None else f"{row['s_per_shape']:6.2f}"
        print(f"{row['problem']:24} {row['submission']:9} {row['shapes']:3} shapes "
              f"{per_shape} s/shape{' (projected)' if row['projected'] else ''}")
    print(json.dumps({key: value for key, value in result.items() if key != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
