"""One-call GPU check of the PTX/CUDA launcher and its examples (issue 4).

Run on a CUDA machine from the repository root:
    PYTHONPATH=. python3 benchmarks/ptx_smoke.py --out DIR
Loads every example through ``evaluator.ptx.loader`` (nvcc/ptxas for the device's target),
launches it on the problem's inputs for every catalogue shape (plus edge shapes), checks against
the problem's fp64 reference with its tolerance (outputs poisoned with NaN first), times it with
CUDA events (median of 20, warm L2: rough) against the baseline (cuBLAS/torch), then checks that a
faulting kernel is reported with the driver's message, and tries ncu's per-opcode executed counts
and the harness end to end. Prints a table; writes smoke.json and logs into DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evaluator.problems import get_problem
from evaluator.ptx.errors import PtxError
from evaluator.ptx.loader import load_native_kernel

EXAMPLES = [
    ("vector_add", "ptx", "examples/ptx/vector_add.ptx"),
    ("vector_add", "cuda", "examples/cuda/vector_add.cu"),
    ("gemm_bf16", "ptx", "examples/ptx/gemm_bf16_mma.ptx"),
    ("gemm_bf16", "ptx", "examples/ptx/gemm_bf16_wgmma_tma.ptx"),
    ("gemm_bf16", "cuda", "examples/ptx/gemm_bf16_wgmma_tma.cu"),
]
EXTRA_SHAPES = {
    "vector_add": [{"N": 3}, {"N": 1000001}],
    "gemm_bf16": [{"M": 200, "N": 300, "K": 72}, {"M": 129, "N": 257, "K": 8}, {"M": 77, "N": 130, "K": 100}],
}
PEAK_BF16, PEAK_HBM = 989e12, 4.8e12  # H200 datasheet (docs/scoring.md)


def time_call(fn: Any, reps: int = 20) -> float:
    """Median of CUDA-event timings in microseconds (warm L2: a rough figure, not the harness's)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def check(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[bool, float]:
    got, ref = out.double(), ref.double()
    err = (got - ref).abs()
    ok = bool(torch.isfinite(got).all()) and bool((err <= atol + rtol * ref.abs()).all())
    return ok, float(err.max()) if err.numel() else 0.0


def t_sol_us(problem: Any, axes: dict[str, int]) -> float:
    counts = problem.counts(axes)
    return (
        max(counts.total_flops / PEAK_BF16 if problem.name != "vector_add" else 0.0, counts.bytes / PEAK_HBM)
        * 1e6
    )


def load_all(log: list[str]) -> dict[str, Any]:
    kernels = {}
    for name, language, path in EXAMPLES:
        started = time.time()
        try:
            kernel = load_native_kernel(language, Path(path).read_text(), None, get_problem(name), "cuda")
        except PtxError as error:
            log.append(f"LOAD FAILED {path}: {error.message}")
            continue
        ev = kernel.evidence
        log.append(
            f"loaded {path} ({language}) in {time.time() - started:.1f}s: entry {kernel.entry}, "
            f"{ev.registers} regs, SASS {ev.sass_families}, missing {ev.missing}"
        )
        kernels[path] = kernel
    return kernels


def run_problem(name: str, kernels: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    problem = get_problem(name)
    refmod = problem.reference_module()
    shapes = [dict(s.axes) for s in problem.shapes] + EXTRA_SHAPES.get(name, [])
    mine = [(p, k) for p, k in kernels.items() if any(e[2] == p and e[0] == name for e in EXAMPLES)]
    for axes in shapes:
        inputs = refmod.generate_inputs(axes, 1, "cuda", problem.distributions[0])
        ref = refmod.reference(inputs, axes)
        ordered = [inputs[t.name] for t in problem.inputs]
        outs = [
            torch.empty(t.concrete_shape(axes), dtype=getattr(torch, t.dtype), device="cuda")
            for t in problem.outputs
        ]
        base_us = time_call(lambda: refmod.baseline(*ordered, *outs))  # noqa: B023 - called at once
        for path, kernel in mine:
            rows.append(run_one(problem, path, kernel, axes, ordered, ref, base_us))
        torch.cuda.empty_cache()


def run_one(
    problem: Any,
    path: str,
    kernel: Any,
    axes: dict[str, int],
    ordered: list[torch.Tensor],
    ref: dict[str, torch.Tensor],
    base_us: float,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "problem": problem.name,
        "kernel": Path(path).name,
        "axes": axes,
        "baseline_us": base_us,
    }
    outs = [
        torch.full(t.concrete_shape(axes), float("nan"), dtype=getattr(torch, t.dtype), device="cuda")
        for t in problem.outputs
    ]
    try:
        run = kernel.for_shape(axes)
        run(*ordered, *outs)
        torch.cuda.synchronize()
    except PtxError as error:
        row.update(status="refused", message=error.message)
        return row
    ok, max_err = check(outs[0], ref[problem.outputs[0].name], problem.atol, problem.rtol)
    row.update(status="correct" if ok else "WRONG", max_abs_err=max_err)
    if ok:
        us = time_call(lambda: run(*ordered, *outs))
        flops = problem.counts(axes).total_flops
        row.update(us=us, tflops=flops / us / 1e6, vs_baseline=base_us / us, sol=t_sol_us(problem, axes) / us)
    return row


def fault_child() -> int:
    """In a child process: launch the faulting fixture and print what the driver said."""
    problem = get_problem("vector_add")
    kernel = load_native_kernel(
        "ptx", Path("tests/fixtures/ptx/fault.ptx").read_text(), None, problem, "cuda"
    )
    a = torch.ones(1024, device="cuda")
    run = kernel.for_shape({"N": 1024})
    try:
        run(a, a, torch.empty_like(a))
        torch.cuda.synchronize()
    except (RuntimeError, PtxError) as error:
        print(json.dumps({"caught": type(error).__name__, "message": str(error)[:300]}))
        return 0
    print(json.dumps({"caught": None}))
    return 1


#: Side checks in their own processes: (name, time limit in s, command after the interpreter).
SIDE_RUNS = [
    ("fault", 60, "benchmarks/ptx_smoke.py --fault"),
    (
        "harness_wgmma",
        80,
        (
            "-m evaluator run gemm_bf16 examples/ptx/gemm_bf16_wgmma_tma.ptx --language ptx "
            "--mode test --shapes quick --json"
        ),
    ),
    (
        "harness_spin",
        45,
        "-m evaluator run vector_add tests/fixtures/ptx/spin.ptx --language ptx --time-limit-test 10 --json",
    ),
]
NCU = (
    "ncu --clock-control none --metrics sass__inst_executed_per_opcode --print-metric-instances details"
    " --csv -k regex:gemm_bf16_wgmma -c 1"
)


def side_runs(out: Path, log: list[str]) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    runs = [(name, limit, [sys.executable, *args.split()]) for name, limit, args in SIDE_RUNS]
    runs.append(("ncu_opcodes", 90, [*NCU.split(), sys.executable, "benchmarks/ptx_smoke.py", "--one"]))
    for name, limit, command in runs:
        started = time.time()
        try:
            done = subprocess.run(
                command, check=False, capture_output=True, text=True, timeout=limit, env=env
            )
            text = f"rc={done.returncode}\n{done.stdout}\n--- stderr\n{done.stderr}"
        except (subprocess.TimeoutExpired, FileNotFoundError) as error:
            text = f"did not finish: {error}"
        (out / f"{name}.log").write_text(text)
        log.append(f"{name} ({time.time() - started:.0f}s): {text[:600]!r}")


def one_launch() -> int:
    """For ncu: one wgmma launch on a mid-size shape."""
    problem = get_problem("gemm_bf16")
    kernel = load_native_kernel(
        "ptx", Path("examples/ptx/gemm_bf16_wgmma_tma.ptx").read_text(), None, problem, "cuda"
    )
    axes = {"M": 1024, "N": 1024, "K": 1024}
    inputs = problem.reference_module().generate_inputs(axes, 1, "cuda", "normal")
    c = torch.empty(1024, 1024, dtype=torch.bfloat16, device="cuda")
    kernel.for_shape(axes)(inputs["A"], inputs["B"], c)
    torch.cuda.synchronize()
    return 0


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'kernel':28} {'shape':22} {'status':8} {'max_err':>9} {'us':>9} "
        f"{'TFLOP/s':>8} {'xcuBLAS':>7} {'SOL':>6}"
    ]
    for r in rows:
        shape = "x".join(str(v) for v in r["axes"].values())
        nums = (
            f"{r['us']:9.1f} {r['tflops']:8.1f} {r['vs_baseline']:7.2f} {r['sol']:6.3f}"
            if "us" in r
            else r.get("message", "")[:60]
        )
        err = f"{r['max_abs_err']:9.2e}" if "max_abs_err" in r else " " * 9
        lines.append(f"{r['kernel']:28} {shape:22} {r['status']:8} {err} {nums}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True, help="the folder that receives the results")
    parser.add_argument("--fault", action="store_true")
    parser.add_argument("--one", action="store_true")
    args = parser.parse_args()
    if args.fault:
        return fault_child()
    if args.one:
        return one_launch()
    args.out.mkdir(parents=True, exist_ok=True)
    log: list[str] = [
        f"{torch.cuda.get_device_name()} cc {torch.cuda.get_device_capability()} torch {torch.__version__}"
    ]
    kernels = load_all(log)
    rows: list[dict[str, Any]] = []
    for name in ("vector_add", "gemm_bf16"):
        run_problem(name, kernels, rows)
        (args.out / "smoke.json").write_text(json.dumps({"log": log, "rows": rows}, indent=1))
    side_runs(args.out, log)
    (args.out / "smoke.json").write_text(json.dumps({"log": log, "rows": rows}, indent=1))
    print("\n".join(log))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
