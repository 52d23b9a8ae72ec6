"""Does a warm spare staging beside a running job move that job's timing? (issue 36)

The runner's own path without a broker (``execute.run`` in a warm spare of a slot, the real jail, per
job uids as root): the same ranked job, ``--runs`` times in each condition, alternating:

- ``alone``: nothing else of the slot runs while the job does;
- ``beside``: spares of the same slot stage one after another for the whole job (each one is
  started, imports torch and the harness, starts its child and its ncu session, says ``staged``,
  and is killed): more staging than a loop ever puts beside a job (one spare per job there).

Per ranked shape and condition: the median of the job's medians, their spread over the runs ((max - min) /
median), and the agreement of each median with its witness (ncu on a GPU, the judge's clock on the CPU: median
/ witness - 1); and per job whether it was witnessed and how many processes NVML saw with a CUDA context
during its witnessed calls (a staged spare must add none). No staged spare may be found on the GPU.

    PYTHONPATH=. python benchmarks/spare_disturbance.py --device cuda --out "$OUT" --problem vector_add
    PYTHONPATH=. python benchmarks/spare_disturbance.py --device cpu --out DIR --runs 2     (dry run)

Run it alone on the GPU: no other runner may use it meanwhile.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_figures import WITNESS_PROCESSES
from runner_cluster import REPO, provenance

from evaluator.problems import get_problem
from runners import execute
from runners.identities import Rotation, claim_block
from runners.slots import Slot, StateDir
from runners.spares import SPARE_START_LIMIT_S, Spare
from solboard_common.protocol import Job


def context(device: str, gpu_type: str, folder: Path) -> execute.Context:
    slot = Slot(key="gpu0" if device == "cuda" else "cpu", device=device, gpu_type=gpu_type,
                gpu_indices=(0,) if device == "cuda" else (), queue=f"gpu.{gpu_type}.x1")
    users = Rotation(claim_block()[0]) if os.geteuid() == 0 else None
    return execute.Context(node="bench", slot=slot, state=StateDir(folder / "state"), users=users)


def job(problem: str, shapes: str, gpu_type: str, index: int) -> Job:
    source = (REPO / "examples" / "python" / f"{problem}.py").read_text()
    return Job(
        job_id=f"disturbance-{index}",
        evaluation_id=index,
        problem=problem,
        problem_version=get_problem(problem).version,
        language="python",
        source=source,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        mode="ranked",
        seed=987654321 + index,
        shapes=shapes,
        gpu_type=gpu_type,
    )  # type: ignore[arg-type]


def warm_spare(ctx: execute.Context) -> Spare:
    spare = Spare.start(ctx)
    spare.wait_staged(SPARE_START_LIMIT_S)
    with ctx.state.gpu_locks(ctx.slot.gpu_indices):
        spare.warm([])
        spare.wait_ready(SPARE_START_LIMIT_S)
    if not spare.ready:
        raise RuntimeError(f"the measured job's spare did not warm up: {spare.problem}")
    return spare


class Stager(threading.Thread):
    """Spares staging one after another until told to stop; counts them and any found on the GPU."""

    def __init__(self, ctx: execute.Context) -> None:
        super().__init__(daemon=True)
        self.ctx, self.stop = ctx, threading.Event()
        self.started, self.staged, self.on_gpu, self.problems = 0, 0, 0, []  # type: ignore[var-annotated]

    def run(self) -> None:
        while not self.stop.is_set():
            self.started += 1
            self.stage_one(Spare.start(self.ctx))

    def stage_one(self, spare: Spare) -> None:
        try:
            spare.wait_for(lambda: spare.staged or self.stop.is_set(), SPARE_START_LIMIT_S, "staged")
            if spare.staged:
                self.staged += 1
            elif spare.problem and "CUDA context" in spare.problem:
                self.on_gpu += 1
            elif spare.problem:
                self.problems.append(spare.problem[:300])
        finally:
            spare.discard()


def one_run(ctx: execute.Context, measured: Job, beside: bool) -> dict[str, Any]:
    spare = warm_spare(ctx)
    stager = Stager(ctx) if beside else None
    if stager is not None:
        stager.start()
    try:
        with ctx.state.gpu_locks(ctx.slot.gpu_indices):
            result = execute.run(measured, ctx, lambda: None, spare=spare)
    finally:
        if stager is not None:
            stager.stop.set()
            stager.join(timeout=SPARE_START_LIMIT_S)
    report = result.report.model_dump(mode="json") if result.report is not None else {}
    notes = " ".join(report.get("notes") or [])
    found = WITNESS_PROCESSES.search(notes)
    return {
        "condition": "beside" if beside else "alone",
        "outcome": result.outcome,
        "status": report.get("status"),
        "witnessed": report.get("witnessed"),
        "witness_gpu_processes": int(found.group(1)) if found else None,
        "spares_started_beside": stager.started if stager else 0,
        "spares_staged_beside": stager.staged if stager else 0,
        "staged_spares_on_gpu": stager.on_gpu if stager else 0,
        "stager_problems": stager.problems if stager else [],
        "flags": report.get("flags"),
        "shapes": {
            shape["shape_id"]: {
                "median_us": (shape.get("timing") or {}).get("median_us"),
                "witness_us": (shape.get("witness") or {}).get("median_us"),
                "ranked": shape.get("ranked"),
            }
            for shape in report.get("shapes") or []
        },
        "message": result.message[-500:],
    }


def compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per shape and condition: median of medians, spread, ncu agreement; and the change between
    the conditions (beside over alone - 1)."""
    shapes = sorted({shape for run in runs for shape in run["shapes"]})
    table: dict[str, Any] = {}
    for shape in shapes:
        row: dict[str, Any] = {}
        for condition in ("alone", "beside"):
            medians = [run["shapes"][shape]["median_us"] for run in runs
                       if run["condition"] == condition and (run["shapes"].get(shape) or {}).get("median_us")]
            agreement = [
                run["shapes"][shape]["median_us"] / run["shapes"][shape]["witness_us"] - 1
                for run in runs
                if run["condition"] == condition
                and (run["shapes"].get(shape) or {}).get("witness_us")
                and run["shapes"][shape].get("median_us")
            ]
            if medians:
                middle = statistics.median(medians)
                row[condition] = {
                    "median_us": round(middle, 4),
                    "runs": len(medians),
                    "spread": round((max(medians) - min(medians)) / middle, 4),
                    "witness_agreement": round(statistics.median(agreement), 4) if agreement else None,
                }
        if "alone" in row and "beside" in row:
            row["beside_over_alone"] = round(row["beside"]["median_us"] / row["alone"]["median_us"] - 1, 4)
        table[shape] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--gpu-type", default=None)
    parser.add_argument("--problem", default="vector_add")
    parser.add_argument("--shapes", default="all", choices=["all", "quick", "ranked"])
    parser.add_argument("--runs", type=int, default=3, help="jobs per condition")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    gpu_type = args.gpu_type or ("h200" if args.device == "cuda" else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="solboard-disturbance-", dir="/tmp"))
    os.chmod(folder, 0o755)  # job users reach their scratch folders under it
    ctx = context(args.device, gpu_type, folder)
    result: dict[str, Any] = {
        "benchmark": "issue 36: a spare staging beside a running job",
        "device": args.device,
        "problem": args.problem,
        "shapes": args.shapes,
        "provenance": provenance(),
        "runs": [],
    }
    path = (
        args.out / f"spare_disturbance_{args.problem}_{args.device}{'_' + args.tag if args.tag else ''}.json"
    )
    try:
        for index in range(2 * args.runs):
            beside = index % 2 == 1
            run = one_run(ctx, job(args.problem, args.shapes, gpu_type, index), beside)
            result["runs"].append(run)
            print(json.dumps({key: value for key, value in run.items() if key != "shapes"}), flush=True)
            path.write_text(json.dumps(result, indent=1, default=str))
        result["comparison"] = compare(result["runs"])
        result["staged_spares_on_gpu"] = sum(run["staged_spares_on_gpu"] for run in result["runs"])
        result["all_witnessed"] = all(run["witnessed"] for run in result["runs"])
    finally:
        path.write_text(json.dumps(result, indent=1, default=str))
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result.get("comparison"), indent=1))


if __name__ == "__main__":
    main()
