"""Measurement quality of the evaluator on a GPU (docs/harness.md targets), as a JSON file.

    python benchmarks/measurement_quality.py --out /tmp/measurement_quality_h200.json

1. Spread: one kernel evaluated five times (fresh process each) -> spread of the medians
   (target <= 0.5% for kernels >= 20 us).
2. Accuracy: for kernels from ~5 us to ~500 us (vector_add and gemm_bf16 baselines), our median
   against Nsight Compute's gpu__time_duration of the same call (cold cache; target within 3%,
   or 1 us below 20 us) and against triton.testing.do_bench.
3. Cost: wall time of a whole ranked evaluation, per shape (target ~2 s).
Provenance (date, GPU, driver, torch, commit) goes into the file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, "") and str(REPO) not in sys.path:
    # Run as a file (python benchmarks/measurement_quality.py): make the repository importable.
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _bench beside it

# Both need the sys.path entries above (run as a file, not as a module).
from _bench import provenance as bench_provenance  # noqa: E402

from evaluator.api import EvaluationRequest, evaluate  # noqa: E402

GOOD = {
    "vector_add": REPO / "tests/fixtures/good/baseline.py",
    "gemm_bf16": REPO / "tests/fixtures/good/gemm_baseline.py",
}
#: (problem, shape id): about 5 us to 500 us on an H200.
KERNELS = [
    ("vector_add", "n1048576"),
    ("vector_add", "n16777216"),
    ("gemm_bf16", "m128_n7168_k5120"),
    ("gemm_bf16", "m1024_n7168_k5120"),
    ("gemm_bf16", "m4096_n4096_k4096"),
]
SPREAD_KERNEL = ("vector_add", "n16777216")


def provenance() -> dict[str, Any]:
    """_bench's header, with the GPU torch sees and the driver NVML reads."""
    import torch

    from evaluator.harness.device import nvml_driver

    return bench_provenance() | {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "driver": nvml_driver(),
    }


def run(
    problem: str, shape_id: str, mode: Literal["test", "ranked"] = "ranked", profile: bool = False
) -> Any:
    request = EvaluationRequest(
        problem=problem, file=GOOD[problem], device="cuda", mode=mode, shape_ids=(shape_id,), profile=profile
    )
    report = evaluate(request)
    if report.status.value != "PASSED":
        raise RuntimeError(f"{problem} {shape_id}: {report.status.value} {report.message}")
    return report


def spread(repeats: int) -> dict[str, Any]:
    medians = [run(*SPREAD_KERNEL).shapes[0].timing.median_us for _ in range(repeats)]
    middle = sorted(medians)[len(medians) // 2]
    return {
        "kernel": "/".join(SPREAD_KERNEL),
        "medians_us": medians,
        "spread_rel": (max(medians) - min(medians)) / middle,
    }


def baseline_call(problem_name: str, shape_id: str, device: str = "cuda") -> Any:
    """A no-argument call of the problem's baseline on seed-1 inputs of one shape."""
    from evaluator.harness.correctness import allocate_outputs
    from evaluator.problems import get_problem

    problem = get_problem(problem_name)
    axes = dict(problem.shape(shape_id).axes)
    ref = problem.reference_module()
    inputs = ref.generate_inputs(axes, 1, device, problem.distributions[0])
    args = [inputs[spec.name] for spec in problem.inputs] + list(
        allocate_outputs(problem.outputs, axes, device).values()
    )
    return lambda: ref.baseline(*args)


def do_bench_us(problem_name: str, shape_id: str) -> float | None:
    try:
        import triton.testing
    except ImportError:
        return None
    return float(triton.testing.do_bench(baseline_call(problem_name, shape_id), warmup=25, rep=200)) * 1e3


def accuracy(kernels: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for problem, shape_id in kernels:
        report = run(problem, shape_id, profile=True)
        shape = report.shapes[0]
        profile = shape.profile
        ncu_us = sum(k.duration_us or 0.0 for k in profile.kernels) if profile and profile.available else None
        ours = shape.timing.median_us
        rows.append(
            {
                "kernel": f"{problem}/{shape_id}",
                "ours_median_us": ours,
                "ours_ci95_half_width_rel": shape.timing.ci95_half_width_rel,
                "ours_n": shape.timing.n,
                "event_median_us": shape.timing.event_median_us,
                "ncu_gpu_time_us": ncu_us,
                "ncu_kernels": [k.name[:80] for k in profile.kernels]
                if profile and profile.available
                else [],
                "ncu_reason": None if profile is None else profile.reason,
                "ours_vs_ncu_rel": (ours - ncu_us) / ncu_us if ncu_us else None,
                "triton_do_bench_us": do_bench_us(problem, shape_id),
                "wall_seconds_shape": shape.wall_seconds,
            }
        )
    return rows


def whole_ranked(problem: str) -> dict[str, Any]:
    started = time.perf_counter()
    report = evaluate(
        EvaluationRequest(
            problem=problem,
            file=GOOD[problem],
            device="cuda",
            mode="ranked",
            shapes="ranked",
            profile=False,
            secret_seed=int.from_bytes(os.urandom(8), "little"),
        )
    )
    wall = time.perf_counter() - started
    return {
        "problem": problem,
        "status": report.status.value,
        "shapes": len(report.shapes),
        "wall_s": wall,
        "wall_per_shape_s": wall / max(len(report.shapes), 1),
        "problem_score": report.problem_score,
        "scores": {s.shape_id: (s.sol.score if s.sol else None) for s in report.shapes},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer kernels and repeats (a smoke run)")
    args = parser.parse_args()
    kernels = [KERNELS[1], KERNELS[4]] if args.quick else KERNELS
    results: dict[str, Any] = {"provenance": provenance(), "quick": args.quick}
    results["spread"] = spread(2 if args.quick else args.repeats)
    results["accuracy"] = accuracy(kernels)
    results["whole_ranked"] = [whole_ranked("vector_add")] + (
        [] if args.quick else [whole_ranked("gemm_bf16")]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
