"""Latency from submit to stored result: ``vector_add`` (the example submission, ranked mode) on
one CPU runner, one submission at a time, N times (default 50). Prints and writes JSON with p50 /
p95 / mean / max of (finished_at - submit time) and the wall time of each stage seen by the site.

    PYTHONPATH=. .venv/bin/python benchmarks/runner_latency.py --out latency.json [--n 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from _bench import output_argument, percentile
from runner_cluster import REPO, Cluster, provenance


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--mode", default="ranked")
    output_argument(parser, "the JSON")
    args = parser.parse_args()
    source = (REPO / "examples/python/vector_add.py").read_text()
    info = provenance()
    with Cluster(runners=1, device="cpu") as cluster:
        cluster.wait_for_runners()
        from leaderboard.models import Evaluation

        samples, statuses = [], []
        for _ in range(args.n):
            started = time.time()
            evaluation_id = cluster.submit("bench", source, mode=args.mode)
            cluster.wait_all([evaluation_id], timeout=300)
            evaluation = Evaluation.objects.get(pk=evaluation_id)
            statuses.append(evaluation.status)
            samples.append(
                {
                    "total_s": evaluation.finished_at.timestamp() - started,
                    "queue_s": evaluation.started_at.timestamp() - started,
                    "evaluator_wall_s": evaluation.report["wall_seconds"] if evaluation.report else None,
                    "status": evaluation.status,
                    "message": "" if evaluation.status == "passed" else evaluation.message[-2000:],
                }
            )
    totals = [sample["total_s"] for sample in samples]
    result = {
        "benchmark": "submit -> stored result, vector_add example, CPU runner, one at a time",
        "mode": args.mode, "n": args.n, "statuses": {s: statuses.count(s) for s in set(statuses)},
        "p50_s": percentile(totals, 0.50), "p95_s": percentile(totals, 0.95),
        "mean_s": statistics.mean(totals), "max_s": max(totals), "min_s": min(totals),
        "queue_p50_s": percentile([s["queue_s"] for s in samples], 0.50),
        "evaluator_wall_p50_s": percentile([s["evaluator_wall_s"] or 0 for s in samples], 0.50),
        "provenance": info, "samples": samples,
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))


if __name__ == "__main__":
    main()
