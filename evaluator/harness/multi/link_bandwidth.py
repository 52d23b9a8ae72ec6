"""The all-reduce bus bandwidth of W GPUs of one host: the calibrated link ceiling of multi-GPU SOL.

Measured as nccl-tests measures it: per message size, WARMUP calls, then ITERATIONS back-to-back
all-reduces of bf16 between CUDA events (host clock on the CPU device), and

    algbw = bytes / time,   busbw = algbw x 2 (W - 1) / W

(a ring all-reduce moves 2 (W - 1) / W of the message over each GPU's links in each direction, so
busbw is comparable with a link's bandwidth per direction). The best busbw over the sizes is the
attainable ``nvlink_gbps_per_direction``; reports give the SOL fraction against it beside the
datasheet's (docs/multigpu.md). NVLink multicast is off, as the harness sets it for every rank.

One process per GPU, each ``python -m evaluator.harness.multi.link_bandwidth --rank r ...`` started and
waited for by ``measure`` (not ``torch.multiprocessing``, whose resource tracker outlives the
measuring process: under a runner, a subreaper, it would be left as a zombie), a ``FileStore``
rendezvous in a temporary folder (no port). On two H200s joined by NV18 it read 331 GB/s at 1 GiB, 74% of the
datasheet's 450 GB/s (benchmarks/results/multigpu.md#two-h200s-over-nccl).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.harness.multi.rank_env import rank_environment
from evaluator.vocabulary import CUDA, DEVICES

#: Message sizes in bytes: 1 MiB to 1 GiB on GPUs, the two smallest on the CPU device.
SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
CPU_SIZES = SIZES[:2]
WARMUP = 5
ITERATIONS = 20


#: Seconds the ranks may take together (NCCL set-up and 1 GiB all-reduces take a few seconds).
LIMIT_S = 600.0
#: The folder that holds the ``evaluator`` package, for the rank processes' imports.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def measure(world_size: int, device: str = "cuda", sizes: list[int] | None = None) -> dict[str, Any]:
    """Rows of bytes, time_us, algbw_gbps and busbw_gbps, and the best busbw (GB/s)."""
    chosen = sizes or (SIZES if device == CUDA else CPU_SIZES)
    with tempfile.TemporaryDirectory(prefix="solboard-busbw-") as folder:
        result = Path(folder) / "rows.json"
        _run_ranks(world_size, device, chosen, Path(folder) / "store", result)
        rows = json.loads(result.read_text())
    return {
        "world_size": world_size,
        "device": device,
        "rows": rows,
        "best_busbw_gbps": max(row["busbw_gbps"] for row in rows),
        "method": f"nccl-tests style: {WARMUP} warm-up, {ITERATIONS} back-to-back all-reduces of bf16, "
        f"{'CUDA events' if device == 'cuda' else 'host clock (gloo)'}; busbw = bytes / time x 2 (W-1)/W; "
        "NVLink multicast off",
    }


def _run_ranks(world_size: int, device: str, sizes: list[int], store: Path, result: Path) -> None:
    """Start every rank, wait for all; a rank that fails or outlasts LIMIT_S ends them all."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
    }
    module = "evaluator.harness.multi.link_bandwidth"
    ranks = [subprocess.Popen([sys.executable, "-m", module, "--rank", str(rank),
                               "--world-size", str(world_size), "--store", str(store), "--out", str(result),
                               "--device", device, "--sizes", ",".join(map(str, sizes))],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for rank in range(world_size)]
    deadline = time.monotonic() + LIMIT_S
    try:
        for rank, process in enumerate(ranks):
            _, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 1.0))
            if process.returncode != 0:
                raise RuntimeError(f"link measurement: rank {rank} exited with status {process.returncode}: "
                                   f"{stderr.decode(errors='replace')[-2000:]}")
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()


def _rank(
    rank: int, world_size: int, store_path: str, result_path: str, device: str, sizes: list[int]
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(rank_environment())
    store = dist.FileStore(store_path, world_size)
    on_gpu = device == CUDA
    if on_gpu:
        torch.cuda.set_device(rank)
        where = torch.device("cuda", rank)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=world_size, device_id=where)
    else:
        where = torch.device("cpu")
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        rows = [_one_size(size, world_size, where, on_gpu) for size in sizes]
        if rank == 0:
            Path(result_path).write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


def _one_size(size: int, world_size: int, where: Any, on_gpu: bool) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    tensor = torch.ones(size // 2, dtype=torch.bfloat16, device=where)
    for _ in range(WARMUP):
        dist.all_reduce(tensor)
    if on_gpu:
        torch.cuda.synchronize()
    dist.barrier()
    if on_gpu:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    began = time.perf_counter()
    for _ in range(ITERATIONS):
        dist.all_reduce(tensor)
    if on_gpu:
        end.record()
        torch.cuda.synchronize()
        elapsed_s = start.elapsed_time(end) / 1e3
    else:
        elapsed_s = time.perf_counter() - began
    seconds = elapsed_s / ITERATIONS
    algbw = size / seconds / 1e9
    return {"bytes": size, "time_us": seconds * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2 * (world_size - 1) / world_size}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one rank of the all-reduce bus bandwidth measurement")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=DEVICES, default=CUDA)
    parser.add_argument("--sizes", required=True)
    args = parser.parse_args(argv)
    _rank(
        args.rank,
        args.world_size,
        args.store,
        args.out,
        args.device,
        [int(size) for size in args.sizes.split(",")],
    )


if __name__ == "__main__":
    main()
