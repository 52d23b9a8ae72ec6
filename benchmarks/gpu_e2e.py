"""One end-to-end GPU job: site worker + one runner node on the embedded broker, the example
``vector_add`` submission in ranked mode on the node's GPU 0, its report written to OUT.

    python benchmarks/gpu_e2e.py --out "$OUT"      (benchmarks/gpu_e2e.sh sets everything up)
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from runner_cluster import REPO, Cluster, provenance


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=1500)
    parser.add_argument("--device", default="0", help="runner --device (cpu for a dry run without a GPU)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    info = provenance()
    source = (REPO / "examples/python/vector_add.py").read_text()
    cluster = Cluster(runners=1, device=args.device, keep=True)
    summary: dict[str, object] = {"provenance": info, "folder": str(cluster.folder)}
    try:
        with cluster:
            cluster.wait_for_runners(timeout=1200)  # includes the one-off calibration
            from leaderboard.models import Evaluation, RunnerNode

            node = RunnerNode.objects.select_related("gpu_type").get()
            summary["runner"] = {"name": node.name, "gpu_type": node.gpu_type_id and node.gpu_type.key,
                                 "gpus": node.gpus, "calibration": node.calibration}
            started = time.time()
            evaluation_id = cluster.submit("gpu-e2e", source, mode="ranked", gpu_type=node.gpu_type.key)
            cluster.wait_all([evaluation_id], timeout=args.timeout)
            evaluation = Evaluation.objects.get(pk=evaluation_id)
            summary.update({
                "status": evaluation.status, "evaluator_status": evaluation.evaluator_status,
                "message": evaluation.message, "score": evaluation.score, "attempts": evaluation.attempts,
                "rank_eligible": evaluation.rank_eligible, "submit_to_stored_s": time.time() - started,
                "shape_results": list(evaluation.shape_results.values("shape__shape_id", "status", "median_us",
                                                                       "baseline_median_us", "sol_fraction",
                                                                       "score")),
            })
            (args.out / "gpu_e2e_report.json").write_text(json.dumps(evaluation.report, indent=1))
    finally:
        (args.out / "gpu_e2e_summary.json").write_text(json.dumps(summary, indent=1, default=str))
        for log in cluster.folder.glob("*.log"):
            shutil.copy(log, args.out / log.name)
        shutil.rmtree(cluster.folder, ignore_errors=True)
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
