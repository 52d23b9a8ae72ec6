"""How often does a check flag an honest kernel? Every problem's example and its baseline (as a
submission), run as ranked runner jobs in the jail on the CPU development device, several times.

    python benchmarks/false_positives.py --runs 2 --out benchmarks/results/false_positives_cpu.json

Every one must end PASSED, witnessed, with no flag: anything else is a false positive, recorded
with its message. (The same on a GPU runner is benchmarks/witness_round.py's honest section.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.problems import load_catalogue
from runners import execute, sandbox
from runners.slots import Slot, StateDir, claim_job_user
from solboard_common.protocol import Job

REPO = Path(__file__).resolve().parent.parent


def sources(problem: str) -> dict[str, str]:
    example = REPO / "examples" / "python" / f"{problem}.py"
    found = {"baseline": f"from evaluator.problems.{problem}.reference import baseline as kernel\n"}
    if example.exists():
        found["example"] = example.read_text()
    return found


def job_for(problem: str, version: int, source: str) -> Job:
    return Job(job_id=f"fp-{time.monotonic_ns()}", evaluation_id=1, problem=problem, problem_version=version,
               language="python", source=source, source_sha256=hashlib.sha256(source.encode()).hexdigest(),
               mode="ranked", seed=int.from_bytes(os.urandom(6), "little"), gpu_type="cpu")


def run_one(problem: str, version: int, source: str, user: sandbox.JobUser | None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="solboard-fp-", dir="/tmp"))
    os.chmod(folder, 0o755)
    slot = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
    ctx = execute.Context(node="fp", slot=slot, state=StateDir(folder / "state"), user=user, calibration=None)
    started = time.monotonic()
    try:
        result = execute.run(job_for(problem, version, source), ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report = result.report
    line: dict[str, Any] = {"outcome": result.outcome, "seconds": round(time.monotonic() - started, 1)}
    if report is None:
        return {**line, "false_positive": True, "message": result.message[:500]}
    unconfirmed = [s.shape_id for s in report.shapes if s.witness is not None and not s.witness.confirmed]
    line.update(status=report.status.value, witnessed=report.witnessed, flags=report.flags,
                message=report.message[:300], unconfirmed=unconfirmed,
                sandbox_gaps=report.sandbox.get("gaps", ""))
    line["false_positive"] = report.status.value != "PASSED" or not report.witnessed or bool(report.flags)
    return line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    user = None
    lock = None
    if os.geteuid() == 0:
        name, lock = claim_job_user()
        user = sandbox.ensure_job_user(name)
    results = []
    for name, problem in sorted(load_catalogue().items()):
        for kind, source in sources(name).items():
            for attempt in range(args.runs):
                line = run_one(name, problem.version, source, user)
                results.append({"problem": name, "submission": kind, "run": attempt, **line})
                print(json.dumps(results[-1])[:300], flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=False).stdout.strip()
    summary = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit,
        "host": platform.node(), "device": "cpu (development device), runner jail as "
        + ("job user" if user else "the runner's own user"),
        "runs": len(results), "false_positives": sum(1 for r in results if r["false_positive"]),
        "results": results,
    }
    args.out.write_text(json.dumps(summary, indent=1))
    print(f"{summary['false_positives']} false positives in {len(results)} honest runner jobs")
    if lock is not None:
        lock.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
