"""Where our device span and Nsight Compute's ``gpu__time_duration`` part ways (GPU only).

    python3 benchmarks/timing_gap.py --out gap.json

Before the launch gate our median read 1.1-2.4 us below ncu on kernels under 25 us and 4.1% above it on a
4096^3 bf16 GEMM (benchmarks/results/timing.md#quality). This script measures the same calls several ways in
one process so the causes can be told apart:

- CUPTI device span per call (torch.profiler, as the harness does): warm back to back; cold (L2
  read-flush before each call) back to back; cold after a synchronise and an idle GPU of 0 us to
  20 ms (the harness synchronises after every call, for its checks);
- NVML SM clock sampled right after each mode;
- per-batch medians of a launch-bound call (rmsnorm, three launches), with and without one pinned
  CPU core: how much the host's launch latency drifts between batches;
- ncu ``gpu__time_duration.sum`` of one call, with ``--cache-control all`` (ncu's default: caches
  flushed before each replay pass) and ``none``, always ``--clock-control none``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: (label, problem, shape id); "tiny" is vector_add on one element: a launch with no work.
CASES = [
    ("tiny_add", "vector_add", None),
    ("vector_add_2^20", "vector_add", "n1048576"),
    ("gemm_m128_n7168_k5120", "gemm_bf16", "m128_n7168_k5120"),
    ("gemm_4096^3", "gemm_bf16", "m4096_n4096_k4096"),
    ("rmsnorm_t128_h4096", "rmsnorm", "t128_h4096"),  # three launches: add, norm, copy
]


def call_for(problem_name: str, shape_id: str | None) -> Any:
    import torch
    from measurement_quality import baseline_call

    if shape_id is None:
        a, b = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
        c = torch.empty(1, device="cuda")
        return lambda: torch.add(a, b, out=c)
    return baseline_call(problem_name, shape_id)


def sm_clock_mhz() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(
            int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
        )
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # a missing clock is recorded as null
        return None


def spans_us(fn: Any, calls: int, flush: Any | None, idle_s: float | None) -> tuple[list[float], list[str]]:
    """Device span of each call (us) and the device operations of the last call.

    ``idle_s`` None: calls back to back (no synchronise); else synchronise after the flush and keep
    the GPU idle that long (host busy-wait) before the call, as a harness between calls would.
    """
    import torch

    from evaluator.harness.timing import trace

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for index in range(calls):
            if flush is not None:
                with torch.profiler.record_function("sb#h"):
                    flush()
            if idle_s is not None:
                torch.cuda.synchronize()
                until = time.perf_counter() + idle_s
                while time.perf_counter() < until:
                    pass
            with torch.profiler.record_function(f"sb#c{index}"):
                fn()
        torch.cuda.synchronize()
    batch = trace.attribute(list(prof.profiler.kineto_results.events()))
    calls_seen = [batch.calls[i] for i in sorted(batch.calls)]
    return [call.span_ns / 1e3 for call in calls_seen], calls_seen[-1].names


#: (mode, calls, flush before each call, idle before each call in seconds or None: back to back)
MODES = [
    ("warm_back_to_back", 60, False, None),
    ("cold_back_to_back", 60, True, None),
    ("cold_idle_0us", 60, True, 0.0),
    ("cold_idle_50us", 60, True, 50e-6),
    ("cold_idle_200us", 60, True, 200e-6),
    ("cold_idle_1ms", 40, True, 1e-3),
    ("cold_idle_20ms", 20, True, 20e-3),
]


def is_kernel(name: str) -> bool:
    return not name.startswith(("Memset", "Memcpy", "memset", "memcpy"))


def measure_cupti() -> list[dict[str, Any]]:
    import torch

    from evaluator.harness.timing.l2 import ColdL2

    cold = ColdL2(torch.device("cuda"))
    rows = []
    for label, problem, shape_id in CASES:
        fn = call_for(problem, shape_id)
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        row: dict[str, Any] = {"case": label}
        for mode, calls, flush, idle in MODES:
            spans, names = spans_us(fn, calls, cold.flush if flush else None, idle)
            row[mode] = {"median_us": statistics.median(spans), "min_us": min(spans),
                         "max_us": max(spans), "n": len(spans), "sm_clock_mhz_after": sm_clock_mhz()}
            row["ops_per_call"] = names
            row["kernels_per_call"] = sum(1 for name in names if is_kernel(name))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def batch_drift(pinned: bool, batches: int = 12, calls: int = 30) -> dict[str, Any]:
    """Per-batch medians of a launch-bound call (three launches, ~10 us of device work): does the
    host's launch latency drift between batches, and does one pinned CPU core steady it?"""
    import torch

    from evaluator.harness.timing.l2 import ColdL2

    cold = ColdL2(torch.device("cuda"))
    fn = call_for("rmsnorm", "t128_h4096")
    before = os.sched_getaffinity(0)
    if pinned:
        os.sched_setaffinity(0, {min(before)})
    try:
        medians = [statistics.median(spans_us(fn, calls, cold.flush, 0.0)[0]) for _ in range(batches)]
    finally:
        os.sched_setaffinity(0, before)
    return {"pinned": pinned, "batch_medians_us": [round(m, 2) for m in medians],
            "spread_rel": (max(medians) - min(medians)) / statistics.median(medians)}


def ncu_child() -> None:
    """Under ncu: one profiled call per case inside the NVTX range ``gap``."""
    import torch

    for label, problem, shape_id in CASES:
        fn = call_for(problem, shape_id)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("gap")
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print("case", label, flush=True)


def measure_ncu(cache_control: str, ops_per_case: list[int]) -> dict[str, Any]:
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"error": "ncu not found"}
    command = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--nvtx", "--nvtx-include",
               "gap/", "--csv", "--page", "raw", "--print-units", "base", "--metrics",
               ("gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.avg,"
                "gpc__cycles_elapsed.avg.per_second"),
               sys.executable, str(Path(__file__).resolve()), "--ncu-child"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {
            "error": f"no CSV from ncu (rc {done.returncode}): {done.stdout[-1500:]} {done.stderr[-1500:]}"
        }
    rows = [
        row for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))) if row.get("ID", "").isdigit()
    ]
    kernels = [{"name": row.get("Kernel Name", "")[:90],
                "gpu_time_us": (_number(row.get("gpu__time_duration.sum")) or 0.0) / 1e3,
                "sm_cycles_elapsed_max": _number(row.get("sm__cycles_elapsed.max")),
                "smsp_cycles_active_avg": _number(row.get("smsp__cycles_active.avg")),
                "gpc_clock_hz": _number(row.get("gpc__cycles_elapsed.avg.per_second"))} for row in rows]
    per_case, index = {}, 0
    for (label, _, _), count in zip(CASES, ops_per_case, strict=False):
        mine = kernels[index:index + count]
        index += count
        per_case[label] = {"gpu_time_us": sum(k["gpu_time_us"] for k in mine), "kernels": mine}
    return {"cases": per_case, "kernels_seen": len(kernels)}


def _number(text: str | None) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_child:
        ncu_child()
        return 0
    result: dict[str, Any] = {
        "provenance": {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "commit": os.environ.get("SOLBOARD_COMMIT", "unknown")},
        "cupti": measure_cupti(),
        "rmsnorm_batch_drift": [batch_drift(False), batch_drift(True)],
    }
    ops = [row["kernels_per_call"] for row in result["cupti"]]
    result["ncu_cache_all"] = measure_ncu("all", ops)
    result["ncu_cache_none"] = measure_ncu("none", ops)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text[-6000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
