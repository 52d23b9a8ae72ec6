"""End-to-end GPU jobs: a site worker + one runner node on the embedded broker, three jobs on the
node's GPU 0, their reports written to OUT.

    python benchmarks/gpu_e2e.py --out "$OUT"      (benchmarks/gpu_e2e.sh sets everything up)

1. the example ``vector_add`` submission, ranked (a full report: timing, SOL, score, ranking row);
2. a submission that starts a process holding the GPU and leaving the job's process group: the
   sandbox kills it and the runner's NVML check sees the GPU free before the next job;
3. a wrong submission on the same slot right after: INCORRECT_NUMERICAL (the slot took the next job).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from runner_cluster import REPO, Cluster, provenance

GPU_SQUATTER = '''
import subprocess, sys, torch

# A process in its own session that holds a CUDA context for ten minutes: it must not outlive the job.
subprocess.Popen([sys.executable, "-c", "import time, torch; x = torch.ones(1 << 20, device='cuda'); "
                  "print('squatter holds the GPU', flush=True); time.sleep(600)"], start_new_session=True)


def kernel(a, b, c):
    torch.add(a, b, out=c)
'''

WRONG = '''
import torch


def kernel(a, b, c):
    torch.add(a, b, out=c)
    c.mul_(1.05)
'''


def outcome(evaluation_id: int, started: float) -> dict[str, Any]:
    from leaderboard.models import Evaluation

    evaluation = Evaluation.objects.get(pk=evaluation_id)
    report = evaluation.report or {}
    return {
        "evaluation_id": evaluation_id, "status": evaluation.status,
        "evaluator_status": evaluation.evaluator_status, "message": evaluation.message,
        "score": evaluation.score, "attempts": evaluation.attempts, "rank_eligible": evaluation.rank_eligible,
        "submit_to_stored_s": round(time.time() - started, 2), "sandbox": report.get("sandbox"),
        "phase_seconds": report.get("phase_seconds"),
        "shape_results": list(evaluation.shape_results.values(
            "shape__shape_id", "status", "median_us", "baseline_median_us", "sol_fraction", "score")),
    }


def gpu_holders() -> list[int]:
    from runners import nvml_probe

    return nvml_probe.processes_on((0,))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--device", default="0", help="runner --device (cpu for a dry run without a GPU)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    example = (REPO / "examples/python/vector_add.py").read_text()
    cluster = Cluster(runners=1, device=args.device, keep=True, loglevel="INFO")
    summary: dict[str, Any] = {"provenance": provenance(), "folder": str(cluster.folder), "jobs": {}}
    try:
        with cluster:
            began = time.time()
            cluster.wait_for_runners(timeout=600)  # includes the one-off calibration
            summary["runner_up_s"] = round(time.time() - began, 1)
            from leaderboard.models import Evaluation, RankingEntry, RunnerNode

            # A node reports each of its slot kinds (x1, and x2 where it has the GPUs) as a row of its
            # own: the jobs below go to the one-GPU slot.
            node = (RunnerNode.objects.select_related("gpu_type").filter(last_heartbeat__isnull=False)
                    .order_by("gpu_count", "name").first())
            assert node is not None, "no runner node sent a heartbeat"
            summary["runner_nodes"] = list(RunnerNode.objects.values_list("name", "gpu_count"))
            gpu = node.gpu_type.key
            summary["runner"] = {"name": node.name, "gpu_type": gpu, "gpus": node.gpus,
                                 "calibration": node.calibration}
            jobs = (("example_ranked", example, "ranked"), ("gpu_squatter", GPU_SQUATTER, "test"),
                    ("wrong_next", WRONG, "test"))
            for label, source, mode in jobs:
                started = time.time()
                evaluation_id = cluster.submit(f"gpu-e2e-{label}", source, mode=mode, gpu_type=gpu)
                cluster.wait_all([evaluation_id], timeout=args.timeout)
                summary["jobs"][label] = outcome(evaluation_id, started)
                summary["jobs"][label]["gpu_holders_after"] = gpu_holders()
                if label == "example_ranked":
                    report = Evaluation.objects.get(pk=evaluation_id).report
                    (args.out / "gpu_e2e_report.json").write_text(json.dumps(report, indent=1))
            summary["ranking_rows"] = list(RankingEntry.objects.values(
                "problem__name", "gpu_type__key", "shape__shape_id", "track", "score", "median_us"))
    finally:
        (args.out / "gpu_e2e_summary.json").write_text(json.dumps(summary, indent=1, default=str))
        for log in cluster.folder.glob("*.log"):
            shutil.copy(log, args.out / log.name)
        shutil.rmtree(cluster.folder, ignore_errors=True)
    print(json.dumps(summary, indent=1, default=str)[-6000:])


if __name__ == "__main__":
    main()
