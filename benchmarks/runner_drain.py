"""N submissions from several users drained by two CPU runners; none lost, none duplicated.

Submits N evaluations (vector_add example, test mode) round-robin from U users as fast as
``create_submission`` allows, then waits until every one is terminal. Checks, per evaluation:
terminal and passed, started exactly once (attempts == 1, so no duplicate delivery ran), one set
of ShapeResults; and across evaluations: both runners took work, no user exceeded the in-flight
limit at any sample. Writes JSON with throughput and the checks.

    PYTHONPATH=. .venv/bin/python benchmarks/runner_drain.py --out drain.json [--n 200] [--users 4]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from _bench import output_argument
from runner_cluster import REPO, Cluster, provenance


def check(evaluation_ids: list[int], shapes_per_evaluation: int) -> dict[str, object]:
    from django.db.models import Count

    from leaderboard.models import Evaluation

    rows = list(Evaluation.objects.filter(pk__in=evaluation_ids).annotate(n_shapes=Count("shape_results"))
                .values("pk", "status", "attempts", "n_shapes", "runner__name"))
    return {
        "submitted": len(evaluation_ids),
        "found": len(rows),
        "statuses": dict(Counter(row["status"] for row in rows)),
        "attempts": dict(Counter(row["attempts"] for row in rows)),
        "shape_rows_wrong": sum(1 for row in rows if row["n_shapes"] != shapes_per_evaluation),
        "per_runner": dict(Counter(row["runner__name"] for row in rows)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=3600)
    output_argument(parser, "the JSON")
    args = parser.parse_args()
    source = (REPO / "examples/python/vector_add.py").read_text()
    info = provenance()
    with Cluster(runners=2, device="cpu") as cluster:
        cluster.wait_for_runners()
        from leaderboard.dispatch.enqueue import max_inflight_per_user

        started = time.time()
        ids = [cluster.submit(f"user{i % args.users}", source, mode="test") for i in range(args.n)]
        submitted = time.time()
        done = cluster.wait_all(ids, timeout=args.timeout)
        finished = time.time()
        checks = check(ids, shapes_per_evaluation=2)
    result = {
        "benchmark": f"{args.n} submissions from {args.users} users drained by two CPU runners",
        "n": args.n, "users": args.users, "max_inflight_per_user": max_inflight_per_user(),
        "submit_seconds": submitted - started, "drain_seconds": finished - started,
        "throughput_per_minute": 60 * len(done) / (finished - started),
        "terminal": len(done), "lost": args.n - len(done), "checks": checks, "provenance": info,
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
