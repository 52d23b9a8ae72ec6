"""``python -m evaluator calibrate``: attainable ceilings of this GPU, for runners to cache.

A large bf16 GEMM (TFLOP/s) and a large device-to-device copy (TB/s counting read + write), each
the median of several cold-L2 runs timed with CUDA events. The keys match
``evaluator.gpu_specs.with_ceilings``: ``bf16_tensor_tflops``, ``hbm_tbps``.

``--world-size N`` (N > 1) measures the link instead: the all-reduce bus bandwidth of N GPUs
(``evaluator.harness.multi.link_bandwidth``), whose best figure is ``nvlink_gbps_per_direction``, the
calibrated link ceiling of multi-GPU problems. ``--device cpu`` runs that with gloo (a check of the
path; the CPU device has no SOL).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from evaluator.vocabulary import CUDA, DEVICES

HELP = "measure attainable ceilings (bf16 GEMM TFLOP/s, copy TB/s) on this GPU, or the link of N GPUs"

GEMM_SIZE = 8192
COPY_BYTES = 1 << 30
RUNS = 9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--world-size", type=int, default=1, metavar="N",
                        help="N > 1: the all-reduce bus bandwidth of N GPUs (the link ceiling) instead")
    parser.add_argument("--device", choices=DEVICES, default=CUDA,
                        help="cpu: the link measurement with gloo (a check of the path, no SOL figure)")


def _median_seconds(fn: Callable[[], Any], runs: int) -> float:
    import torch

    from evaluator.harness.timing.l2 import ColdL2

    cold = ColdL2(torch.device("cuda"))
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        cold.prepare()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def _gemm_seconds(n: int, runs: int) -> float:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    return _median_seconds(lambda: torch.matmul(a, b.T, out=c), runs)


def _copy_seconds(runs: int) -> float:
    import torch

    src = torch.empty(COPY_BYTES // 4, device="cuda", dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    return _median_seconds(lambda: dst.copy_(src), runs)


def measure(runs: int) -> dict[str, Any]:
    import torch

    n = GEMM_SIZE
    gemm_s = _gemm_seconds(n, runs)
    copy_s = _copy_seconds(runs)
    return {
        "device": torch.cuda.get_device_name(),
        "runs": runs,
        "ceilings": {
            "bf16_tensor_tflops": 2.0 * n**3 / gemm_s / 1e12,
            "hbm_tbps": 2.0 * COPY_BYTES / copy_s / 1e12,
        },
        "method": f"median of {runs} cold-L2 runs, CUDA events; GEMM {n}^3 bf16; copy {COPY_BYTES >> 20} MiB",
    }


def measure_link(world_size: int, device: str) -> dict[str, Any]:
    from evaluator.harness.multi.link_bandwidth import measure as measure_busbw

    link = measure_busbw(world_size, device)
    return {"device": device, "world_size": world_size,
            "ceilings": {"nvlink_gbps_per_direction": link["best_busbw_gbps"]}, "link": link}


def main(args: argparse.Namespace) -> int:
    import torch

    if args.world_size > 1:
        available = torch.cuda.device_count() if args.device == CUDA else args.world_size
        if available < args.world_size:
            print(
                f"error: the link of {args.world_size} GPUs needs {args.world_size} GPUs, "
                f"{available} visible",
                file=sys.stderr,
            )
            return 2
        link = measure_link(args.world_size, args.device)
        if args.json:
            print(json.dumps(link, indent=2))
        else:
            print(f"{args.world_size} x {args.device}: all-reduce bus bandwidth "
                  f"{link['ceilings']['nvlink_gbps_per_direction']:.1f} GB/s")
        return 0
    if not torch.cuda.is_available():
        print("error: calibrate needs a CUDA GPU", file=sys.stderr)
        return 2
    result = measure(args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        ceilings = result["ceilings"]
        print(
            f"{result['device']}: bf16 GEMM {ceilings['bf16_tensor_tflops']:.1f} TFLOP/s, "
            f"copy {ceilings['hbm_tbps']:.3f} TB/s"
        )
    return 0
