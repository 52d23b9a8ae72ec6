"""How often does a check flag an honest kernel, and does a forgery get through? Runner jobs
(``runners.execute.run``: the runner's own path, in its jail) over every problem's example and its
baseline (as a submission), several times, on the CPU development device or a GPU.

    python benchmarks/false_positives.py --runs 2 --out /tmp/false_positives_cpu.json
    python benchmarks/false_positives.py --device cuda --gpu-type h200 \
        --sets examples,baselines,natives,cheats --runs 1 --budget-s 480 --out $OUT/runner_gpu.json

Every honest job must end PASSED, witnessed, with no flag: anything else is a false positive,
recorded with its message. Every cheat (``--sets cheats``) must end not rank-eligible. The file is
rewritten after each job, so a run stopped at its time limit keeps what it measured.
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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.problems import load_catalogue
from runners import execute, identities, sandbox
from runners.slots import Slot, StateDir
from solboard_common.protocol import Job

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: witness_round beside it
from native_examples import EXAMPLES as NATIVE_EXAMPLES  # every PTX/CUDA example, the Hopper ones first
from native_examples import language_of

REPO = Path(__file__).resolve().parent.parent

CHEATS = [
    "c16_forge_near_light",
    "c16_patch_json_encoder",
    "c16_early_ready",
    "c16_hide_from_witness",
    "c16_witness_off_gpu",
    "c16_witness_pipe_inject",
    "c16_starve_judge_clock",
    "c02_finish_after_reply",
    "c14_host_work",
    "c01_side_stream",
    "c09_less_work_when_timed",
]


def submissions(
    sets: list[str], only: list[str] | None, cheats: list[str] | None = None
) -> list[tuple[str, str, str, str]]:
    """(problem, kind, language, source) of every job to run."""
    found: list[tuple[str, str, str, str]] = []
    # Single-GPU problems: a multi-GPU job needs gpu_count ranks (benchmarks/multigpu_h200x2.py runs those).
    catalogue = sorted(name for name, problem in load_catalogue().items() if problem.kind == "single")
    for name in [name for name in only if name in catalogue] if only else catalogue:  # --only's order
        example = REPO / "examples" / "python" / f"{name}.py"
        if "examples" in sets and example.exists():
            found.append((name, "example", "python", example.read_text()))
        if "baselines" in sets:
            found.append((name, "baseline", "python",
                          f"from evaluator.problems.{name}.reference import baseline as kernel\n"))
    if "natives" in sets:
        found += [(native.problem, native.path, language_of(native.path), (REPO / native.path).read_text())
                  for native in NATIVE_EXAMPLES if not only or native.problem in only]
    if "cheats" in sets:
        found += [
            (
                "vector_add",
                f"cheat:{name}",
                "python",
                (REPO / "tests/fixtures/cheats" / f"{name}.py").read_text(),
            )
            for name in CHEATS
            if not cheats or name in cheats
        ]
    return found


def job_for(problem: str, version: int, language: str, source: str, gpu_type: str) -> Job:
    return Job(
        job_id=f"fp-{time.monotonic_ns()}",
        evaluation_id=1,
        problem=problem,
        problem_version=version,
        language=language,
        source=source,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        mode="ranked",
        seed=int.from_bytes(os.urandom(6), "little"),
        shapes="ranked",
        gpu_type=gpu_type,
    )


def slot_for(device: str, gpu_type: str) -> Slot:
    if device == "cpu":
        return Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue="gpu.cpu.x1")
    return Slot(key="gpu0", device="cuda", gpu_type=gpu_type, gpu_indices=(0,), queue=f"gpu.{gpu_type}.x1")


def run_one(job: Job, slot: Slot, users: identities.Rotation | None, cheat: bool) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="solboard-fp-", dir="/tmp"))
    os.chmod(folder, 0o755)
    ctx = execute.Context(
        node="fp", slot=slot, state=StateDir(folder / "state"), users=users, calibration=None
    )
    started = time.monotonic()
    try:
        result = execute.run(job, ctx, lambda: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report = result.report
    line: dict[str, Any] = {"outcome": result.outcome, "seconds": round(time.monotonic() - started, 1)}
    if report is None:
        return {**line, "false_positive": not cheat, "caught": cheat, "message": result.message[:500],
                "log": result.log[-1500:]}
    unconfirmed = [s.shape_id for s in report.shapes if s.witness is not None and not s.witness.confirmed]
    line.update(status=report.status.value, witnessed=report.witnessed, flags=report.flags,
                rank_eligible=report.rank_eligible, problem_score=report.problem_score,
                message=report.message[:300], unconfirmed=unconfirmed, notes=report.notes[:8],
                phases=report.phase_seconds, sandbox_gaps=report.sandbox.get("gaps", ""),
                job_processes=report.sandbox.get("job_processes", ""))
    from witness_round import witness_line

    line["shapes"] = [witness_line(shape.model_dump(mode="json")) for shape in report.shapes]
    ranked = sum(1 for shape in report.shapes if shape.ranked)
    line["witness_s_per_ranked_shape"] = (
        (report.phase_seconds.get("witness", 0.0) / ranked) if ranked else None
    )
    if cheat:
        line["caught"] = not report.rank_eligible
    else:
        line["false_positive"] = report.status.value != "PASSED" or not report.witnessed or bool(report.flags)
    return line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--gpu-type", default="h200")
    parser.add_argument("--sets", default="examples,baselines", help="examples,baselines,natives,cheats")
    parser.add_argument("--only", default=None, help="comma-separated problems, run in this order")
    parser.add_argument(
        "--cheats", default=None, help="comma-separated cheat fixtures (default: all of CHEATS)"
    )
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no job after this many seconds")
    parser.add_argument(
        "--no-job-user",
        action="store_true",
        help="as root, jail jobs as root (when the interpreter lives where a job user cannot read)",
    )
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget_s
    user = None
    lock = None
    if os.geteuid() == 0 and not args.no_job_user:
        sandbox.become_subreaper()
        block, lock = identities.claim_block()
        user = identities.Rotation(block)
    catalogue = load_catalogue()
    slot = slot_for(args.device, args.gpu_type)
    gpu_type = "cpu" if args.device == "cpu" else args.gpu_type
    only = args.only.split(",") if args.only else None
    commit = os.environ.get("SOLBOARD_COMMIT") or subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
    summary: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit,
        "host": platform.node(), "device": f"{args.device} ({gpu_type}), runner jail as "
        + ("job user" if user else "the runner's own user"), "results": [],
    }
    results: list[dict[str, Any]] = summary["results"]
    for attempt in range(args.runs):
        for problem, kind, language, source in submissions(
            args.sets.split(","), only, args.cheats.split(",") if args.cheats else None
        ):
            if time.monotonic() > deadline:
                results.append({"problem": problem, "submission": kind, "run": attempt, "skipped": "budget"})
                continue
            cheat = kind.startswith("cheat:")
            print(f"start {problem} {kind} run {attempt}", flush=True)
            job = job_for(problem, catalogue[problem].version, language, source, gpu_type)
            line = run_one(job, slot, user, cheat)
            results.append({"problem": problem, "submission": kind, "run": attempt, **line})
            print(
                json.dumps({k: v for k, v in results[-1].items() if k not in ("shapes", "log")})[:400],
                flush=True,
            )
            _write(args.out, summary)
    _write(args.out, summary)
    print(f"{summary['false_positives']} false positives in {summary['honest_jobs']} honest runner jobs; "
          f"{summary['cheats_caught']} of {summary['cheats']} cheats caught")
    if lock is not None:
        lock.close()
    return 0


def _write(path: Path, summary: dict[str, Any]) -> None:
    done = [r for r in summary["results"] if "skipped" not in r]
    honest = [r for r in done if not r["submission"].startswith("cheat:")]
    cheats = [r for r in done if r["submission"].startswith("cheat:")]
    summary.update(runs=len(done), honest_jobs=len(honest),
                   false_positives=sum(1 for r in honest if r.get("false_positive")),
                   cheats=len(cheats), cheats_caught=sum(1 for r in cheats if r.get("caught")))
    path.write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    raise SystemExit(main())
