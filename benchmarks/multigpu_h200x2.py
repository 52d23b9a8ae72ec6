"""Multi-GPU problems (issue 13) on a machine with two H200s: the checks the CPU could not make.

    SOLBOARD_COMMIT=<sha> python3 benchmarks/multigpu_h200x2.py --out DIR [--parts busbw,jobs,failures]
        [--budget-s 1500] [--world-size 2] [--shapes all|quick|ranked] [--problems a,b] [--device cuda|cpu]

``--device cpu`` is a dry run of this script on the CPU development device (gloo, the cpu shapes,
no NVML): it checks the driver itself, not the GPU path.

Parts (each writes its JSON under DIR after every step, so a run cut short keeps what it did):

- ``busbw``: NCCL all-reduce bus bandwidth, 1 MiB to 1 GiB of bf16, as nccl-tests measures it
  (CUDA events around 20 back-to-back calls after 5 warm-up calls; busbw = bytes x 2 (W-1)/W / time),
  with NVLink multicast off as the harness sets it. Its best figure becomes the calibrated link
  ceiling (``nvlink_gbps_per_direction``) the jobs below are given, so every report has both SOL
  fractions: against the datasheet's 450 GB/s and against what NCCL reaches here.
- ``jobs``: every multi-GPU problem's baseline (as a submission) and example through
  ``python -m evaluator run --device cuda --world-size W`` (the real harness: CUDA IPC buffers on
  both GPUs, NCCL, CUDA-event timing), the per-shape figures, and whether both GPUs were free of
  compute processes after each job (NVML, 30 s grace).
- ``failures``: tests/fixtures/multi's deadlock and crash on one rank: TIMEOUT / RUNTIME_ERROR, every
  rank killed, GPUs free afterwards.

Provenance in every file: date, host, GPUs and driver (NVML), torch and NCCL versions, the commit
(env SOLBOARD_COMMIT: the machine gets no .git). Needs torch with CUDA and NCCL, nvidia-ml-py and
the evaluator's pydantic; no Django, no network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _bench beside it

from _bench import provenance as bench_provenance

REPO = Path(__file__).resolve().parent.parent

#: What the harness sets in every rank (evaluator/harness/multi/rank_env.py): the measurement matches.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
FIXTURES = REPO / "tests" / "fixtures" / "multi"
#: The recorded busbw of two H200s (benchmarks/results/multigpu.md): a later run with PARTS=jobs
#: reads it when its own folder has no busbw.json.
RECORDED_BUSBW = REPO / "benchmarks" / "results" / "data" / "busbw_h200x2.json"
#: cuda on the H200s; cpu for a dry run of this script (gloo).
DEVICE = "cuda"


def provenance() -> dict[str, Any]:
    """_bench's header, with NCCL's version and every GPU as NVML names it (index, driver, UUID)."""
    facts: dict[str, Any] = bench_provenance("cpu" if DEVICE == "cpu" else None)
    try:
        import torch

        facts.update(
            torch=torch.__version__,
            cuda=torch.version.cuda,
            nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
        )
    except Exception as error:  # provenance is best effort
        facts["torch_error"] = str(error)
    facts["gpus"] = nvml_gpus()
    return facts


def nvml_gpus() -> list[dict[str, Any]]:
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append({"index": index, "name": name.decode() if isinstance(name, bytes) else name,
                         "driver": driver.decode() if isinstance(driver, bytes) else driver,
                         "uuid": str(pynvml.nvmlDeviceGetUUID(handle))})
        return gpus
    except Exception as error:
        return [{"error": str(error)}]


def gpu_holders(indices: list[int]) -> dict[int, list[int]]:
    """pid of every compute process on each GPU (NVML): empty lists mean the GPUs are free."""
    import pynvml

    pynvml.nvmlInit()
    found = {}
    for index in indices:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        found[index] = [int(process.pid) for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    return found


def gpus_free_after(indices: list[int], grace_s: float = 30.0) -> dict[str, Any]:
    """Wait up to ``grace_s`` for every GPU to have no compute process (as the runner's slot does)."""
    if DEVICE == "cpu":
        return {"free": True, "seconds": 0.0, "holders": {}, "note": "CPU dry run: no GPU to check"}
    began = time.monotonic()
    while True:
        holders = gpu_holders(indices)
        if not any(holders.values()) or time.monotonic() - began > grace_s:
            return {"free": not any(holders.values()), "seconds": round(time.monotonic() - began, 2),
                    "holders": {str(index): pids for index, pids in holders.items()}}
        time.sleep(0.5)


def write(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2))
    temporary.replace(path)


# ---------------------------------------------------------------- NCCL bus bandwidth


def part_busbw(out: Path, world_size: int) -> float | None:
    from evaluator.harness.multi.link_bandwidth import measure as measure_busbw

    data: dict[str, Any] = {
        "provenance": provenance(),
        "world_size": world_size,
        "multicast_off": MULTICAST_OFF,
    }
    try:  # the runner's link calibration measures the same way (python -m evaluator calibrate --world-size N)
        link = measure_busbw(world_size, DEVICE)
        data.update(method=link["method"], rows=link["rows"], best_busbw_gbps=link["best_busbw_gbps"])
        data["datasheet_gbps_per_direction"] = 450.0 if DEVICE == "cuda" else None
    except Exception as error:  # recorded, the other parts still run
        data["error"] = f"{type(error).__name__}: {error}"
    data["gpus_after"] = gpus_free_after(list(range(world_size)))
    write(out / "busbw.json", data)
    return data.get("best_busbw_gbps")


# ---------------------------------------------------------------- evaluator jobs


def run_evaluator(
    problem: str, source: Path, world_size: int, extra: list[str], timeout_s: float
) -> dict[str, Any]:
    argv = [sys.executable, "-m", "evaluator", "run", problem, str(source), "--device", DEVICE, "--json",
            "--world-size", str(world_size), *extra]
    began = time.monotonic()
    try:
        result = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return {"argv": argv[2:], "error": f"the evaluator ran past {timeout_s:.0f} s", "wall_s": timeout_s}
    job: dict[str, Any] = {"argv": argv[2:], "returncode": result.returncode,
                           "wall_s": round(time.monotonic() - began, 2)}
    if result.returncode != 0:
        job["stderr_tail"] = result.stderr[-4000:]
        return job
    report = json.loads(result.stdout)
    job.update(
        status=report["status"],
        message=report["message"][:1000],
        world_size=report.get("world_size"),
        notes=report["notes"][:20],
        flags=report["flags"],
        phase_seconds=report["phase_seconds"],
        device=report["device"],
        log_tail=report["log"][-3000:],
        shapes=[_shape(s) for s in report["shapes"]],
    )
    return job


def _shape(shape: dict[str, Any]) -> dict[str, Any]:
    timing, baseline, sol = (
        shape.get("timing") or {},
        shape.get("baseline_timing") or {},
        shape.get("sol") or {},
    )
    return {
        "shape_id": shape["shape_id"],
        "status": shape["status"],
        "message": shape["message"][:500],
        "kernel_median_us": timing.get("median_us"),
        "kernel_ci95_rel": timing.get("ci95_half_width_rel"),
        "kernel_n": timing.get("n"),
        "kernel_rank_median_us": timing.get("rank_median_us"),
        "baseline_median_us": baseline.get("median_us"),
        "baseline_rank_median_us": baseline.get("rank_median_us"),
        "t_sol_us": sol.get("t_sol_us"),
        "bound": sol.get("bound"),
        "comm_bytes": sol.get("comm_bytes"),
        "sol_fraction_datasheet": sol.get("sol_fraction"),
        "t_sol_calibrated_us": sol.get("t_sol_attainable_us"),
        "sol_fraction_calibrated": sol.get("sol_fraction_attainable"),
        "score": sol.get("score"),
        "speedup": sol.get("speedup"),
        "faster_than_light": sol.get("faster_than_light"),
        "wall_seconds": shape.get("wall_seconds"),
        # The judge's clock per iteration [median, 10th percentile]: the honest figures a
        # judge's-clock witness on the GPU would set its tolerance from.
        "judge_wait_us": timing.get("judge_wait_us"),
        # Whole, for diagnosis: spread, iterations, checks, each rank's gate and host launch time.
        "kernel_timing": {k: v for k, v in timing.items() if not isinstance(v, list) or len(v) <= 16},
        "baseline_timing": {k: v for k, v in baseline.items() if not isinstance(v, list) or len(v) <= 16},
    }


def multi_problems() -> list[str]:
    from evaluator.problems import load_catalogue

    return sorted(name for name, problem in load_catalogue().items() if problem.kind == "multi")


def part_jobs(out: Path, world_size: int, shapes: str, busbw_gbps: float | None, deadline: float,
              only: list[str] | None = None) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="multigpu-"))
    calibration = scratch / "calibration.json"
    ceilings = {"nvlink_gbps_per_direction": busbw_gbps} if busbw_gbps else {}
    calibration.write_text(json.dumps({"ceilings": ceilings}))
    data: dict[str, Any] = {"provenance": provenance(), "world_size": world_size, "shapes": shapes,
                            "calibration": ceilings, "jobs": []}
    for problem in only or multi_problems():
        baseline = scratch / f"{problem}_baseline.py"
        baseline.write_text(f"from evaluator.problems.{problem}.reference import baseline as kernel\n")
        submissions = [("baseline", baseline), ("example", REPO / "examples" / "python" / f"{problem}.py")]
        overlapped = (
            REPO / "examples" / "python" / f"{problem}_overlap.py"
        )  # allgather_gemm, gemm_reducescatter
        if overlapped.exists():
            submissions.append(("overlap", overlapped))
        for kind, source in submissions:
            left = deadline - time.monotonic()
            if left < 60:
                data["jobs"].append({"problem": problem, "kind": kind, "skipped": "device budget spent"})
                continue
            extra = ["--shapes", shapes, "--calibration", str(calibration)]
            job = {"problem": problem, "kind": kind,
                   **run_evaluator(problem, source, world_size, extra, min(left - 30, 900))}
            job["gpus_after"] = gpus_free_after(list(range(world_size)))
            data["jobs"].append(job)
            write(out / "jobs.json", data)
            print(f"{problem} {kind}: {job.get('status') or job.get('error') or job.get('returncode')} "
                  f"in {job.get('wall_s')} s; GPUs free: {job['gpus_after']['free']}", flush=True)
    write(out / "jobs.json", data)


def part_failures(out: Path, world_size: int, deadline: float) -> None:
    data: dict[str, Any] = {"provenance": provenance(), "world_size": world_size, "jobs": []}
    cases = [("deadlock.py", ["--time-limit-test", "20"], "TIMEOUT"),
             ("crash_one_rank.py", [], "RUNTIME_ERROR"),
             ("multicast_on_import.py", [], "REJECTED")]
    for fixture, extra, expected in cases:
        if deadline - time.monotonic() < 90:
            data["jobs"].append({"fixture": fixture, "skipped": "device budget spent"})
            continue
        job = {
            "fixture": fixture,
            "expected": expected,
            **run_evaluator("allreduce", FIXTURES / fixture, world_size, ["--shapes", "quick", *extra], 300),
        }
        job["gpus_after"] = gpus_free_after(list(range(world_size)))
        job["as_expected"] = job.get("status") == expected and job["gpus_after"]["free"]
        data["jobs"].append(job)
        write(out / "failures.json", data)
        print(
            f"{fixture}: {job.get('status')} (expected {expected}); GPUs free: {job['gpus_after']['free']}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--parts", default="busbw,jobs,failures")
    parser.add_argument("--budget-s", type=float, default=1500)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--shapes", choices=["all", "quick", "ranked"], default="all")
    parser.add_argument(
        "--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run of this script"
    )
    parser.add_argument(
        "--problems", default="", help="comma-separated multi-GPU problems (default: all, in order)"
    )
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    deadline = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    busbw = part_busbw(args.out, args.world_size) if "busbw" in parts else None
    for recorded in (args.out / "busbw.json", RECORDED_BUSBW):  # a later run reuses an earlier measurement
        if busbw is None and recorded.exists():
            busbw = json.loads(recorded.read_text()).get("best_busbw_gbps")
    if "failures" in parts:  # short, and the GPU-freeing check matters most: before the long jobs
        part_failures(args.out, args.world_size, deadline)
    if "jobs" in parts:
        part_jobs(args.out, args.world_size, args.shapes, busbw, deadline,
                  [name for name in args.problems.split(",") if name] or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
