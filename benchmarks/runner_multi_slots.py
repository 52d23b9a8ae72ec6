"""A runner node serving x1 and x<n> queues together, through the site and a broker: nothing lost,
no x1 job ever beside an x<n> job on a shared GPU, the GPUs free after every job.

    PYTHONPATH=. python benchmarks/runner_multi_slots.py --device cuda --gpu-type h200 --out DIR  (2 GPUs)
    PYTHONPATH=. python benchmarks/runner_multi_slots.py --device cpu --gpu-type cpu --out DIR   (CPU dry run)

One node (``benchmarks/runner_cluster.py``: a fresh SQLite database, the embedded broker or
``--broker``, one site worker) gets ``--multi`` multi-GPU submissions (allreduce's example, queued on
``gpu.<type>.x2``) and ``--single`` single-GPU ones (vector_add's example, ``gpu.<type>.x1``), all
submitted at once, in test mode. Recorded per evaluation: status, the runner slot, the site's
started_at / finished_at (a slot sends "started" and its result while it holds its GPU locks, and
one site worker stores them in order, so two jobs on a shared GPU never overlap in these times);
then which pairs of jobs overlapped in time on slots that share a GPU (there must be none), and
on a GPU machine the processes NVML still sees on each GPU (there must be none). On the CPU device
both slots (``cpu``, ``cpux2``) share the one ``cpu`` lock.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from runner_cluster import REPO, Cluster, provenance

EXAMPLES = REPO / "examples" / "python"


def slot_gpus(slot: str, gpu_count: int) -> set[str]:
    """The lock names a slot takes: ``gpu<i>`` for an x1 GPU slot, all GPUs for an x<n> slot,
    ``cpu`` for both CPU slots (runners/slots.py)."""
    if slot.startswith("cpu"):
        return {"cpu"}
    if slot.startswith("gpu"):
        return {slot}
    return {f"gpu{index}" for index in range(gpu_count)}


def overlaps(records: list[dict[str, Any]], gpu_count: int) -> list[tuple[int, int]]:
    """Pairs of evaluations whose [started_at, finished_at] intersect on slots sharing a lock."""
    found = []
    for index, first in enumerate(records):
        for second in records[index + 1:]:
            times = (first["started_at"], first["finished_at"], second["started_at"], second["finished_at"])
            if not (first["slot"] and second["slot"]) or any(value is None for value in times):
                continue
            if not slot_gpus(first["slot"], gpu_count) & slot_gpus(second["slot"], gpu_count):
                continue
            if first["started_at"] < second["finished_at"] and second["started_at"] < first["finished_at"]:
                found.append((first["evaluation"], second["evaluation"]))
    return found


def gpu_holders() -> dict[int, list[int]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    holders = {}
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        holders[index] = [process.pid for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    return holders


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="the runner's --device: cpu, or cuda (every GPU)")
    parser.add_argument("--gpu-type", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--multi", type=int, default=2, help="allreduce submissions (x2 queue)")
    parser.add_argument("--single", type=int, default=4, help="vector_add submissions (x1 queue)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--broker", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    holders = gpu_holders() if args.device != "cpu" else None
    gpu_count = len(holders) if holders else 1
    result: dict[str, Any] = {
        "benchmark": "x1 and x2 queues on one runner node",
        "device": args.device,
        "gpu_type": args.gpu_type,
        "provenance": {**provenance(), "commit_env": os.environ.get("SOLBOARD_COMMIT", "unknown")},
    }
    path = args.out / f"runner_multi_slots_{args.gpu_type}.json"
    cluster = Cluster(runners=1, device=args.device, keep=True, loglevel="INFO",
                      env={"CELERY_BROKER_URL": args.broker} if args.broker else {})
    try:
        with cluster:
            cluster.wait_for_runners(timeout=900)
            multi_source = (EXAMPLES / "allreduce.py").read_text()
            single_source = (EXAMPLES / "vector_add.py").read_text()
            began = time.time()
            ids = [cluster.submit(f"multi{index}", multi_source, "test", args.gpu_type, "allreduce")
                   for index in range(args.multi)]
            ids += [cluster.submit(f"single{index}", single_source, "test", args.gpu_type)
                    for index in range(args.single)]
            cluster.wait_all(ids, timeout=args.timeout)
            result["wall_s"] = round(time.time() - began, 1)
            result["evaluations"] = records = collect(ids)
            result["lost"] = [
                record["evaluation"] for record in records if record["status"] in ("queued", "running")
            ]
            result["overlapping_pairs"] = overlaps(records, gpu_count)
            result["gpu_holders_after"] = gpu_holders() if args.device != "cpu" else None
            result["ok"] = (not result["lost"] and not result["overlapping_pairs"]
                            and all(record["status"] == "passed" for record in records)
                            and not any((result["gpu_holders_after"] or {}).values()))
    finally:
        path.write_text(json.dumps(result, indent=1, default=str))
        for log in cluster.folder.glob("*.log"):
            (args.out / log.name).write_bytes(log.read_bytes())
    print(json.dumps({key: result.get(key) for key in ("ok", "wall_s", "lost", "overlapping_pairs",
                                                       "gpu_holders_after")}, default=str))
    for record in result.get("evaluations", []):
        print(record["evaluation"], record["problem"], record["status"], record["slot"],
              record["started_at"], record["finished_at"])


def collect(ids: list[int]) -> list[dict[str, Any]]:
    from leaderboard.models import Evaluation

    records = []
    for evaluation in Evaluation.objects.filter(pk__in=ids).select_related("runner", "submission__problem"):
        report = evaluation.report or {}
        records.append(
            {
                "evaluation": evaluation.pk,
                "problem": evaluation.submission.problem.name,
                "status": evaluation.status,
                "message": evaluation.message[:300],
                "slot": evaluation.runner.name.rsplit(":", 1)[-1] if evaluation.runner else None,
                "world_size": report.get("world_size"),
                "started_at": evaluation.started_at,
                "finished_at": evaluation.finished_at,
            }
        )
    return sorted(records, key=lambda record: record["started_at"] or record["finished_at"] or 0)


if __name__ == "__main__":
    main()
