"""Check the catalogue on this device: does each baseline pass its own tolerance with margin at
every shape, and how close to the speed of light is it?

    python -m evaluator.problems.selfcheck [PROBLEM ...] [--device cuda] [--gpu h200]
        [--seed 1] [--shapes all|quick|cpu] [--kernel examples/python/PROBLEM.py]

For each (problem, shape, distribution): the worst margin per output (max |out - ref| over the
allowed error; < 1 everywhere means every element passes), the matched ratio against the
problem's requirement, and on CUDA the baseline's median time over a few
calls with L2 flushed before each (CUDA events; a sanity check, not the harness's measurement),
t_SOL and sol_fraction, which must stay below 1. A developer's tool: the harness does the ranking.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch

from evaluator.gpu_specs import get_gpu_spec
from evaluator.harness.correctness import allocate_outputs
from evaluator.harness.work import error_scales
from evaluator.problems import Problem, Shape, get_problem, load_catalogue
from evaluator.sol import t_sol

FLUSH_BYTES = 512 * 2**20


def _outputs(problem: Problem, shape: Shape, device: str) -> dict[str, torch.Tensor]:
    """Poisoned as the harness poisons them: NaN, or a sentinel in integer outputs."""
    return allocate_outputs(problem.outputs, shape.axes, device)


def _margins(problem: Problem, outputs: dict[str, torch.Tensor], reference: dict[str, torch.Tensor],
             scales: dict[str, torch.Tensor], axes: dict[str, int] | None = None) -> dict:
    result = {}
    for name, ref in reference.items():
        tolerance = problem.tolerance_for(name, axes)
        ref = ref.double()
        out = outputs[name].double()
        scale = scales.get(name)
        allowed = tolerance.allowed_error(ref, None if scale is None else scale.double())
        error = (out - ref).abs()
        ok = torch.isfinite(out) & (error <= allowed)
        # A count over the total, as the harness counts (correctness.compare): a mean in doubles on
        # CUDA read 1 - 1e-16 on all-exact outputs on the H200 and failed them.
        matched = int(ok.sum()) / max(ok.numel(), 1)
        result[name] = {
            # An exact match where nothing is allowed (a zero under atol 0) uses none of the margin.
            "margin": torch.where(error == 0, 0.0, error / allowed).max().item(),
            "matched": matched,
            "passed": matched >= tolerance.matched_ratio,
            "ref_rms": ref.square().mean().sqrt().item(),
        }
    return result


def _independent_margins(problem: Problem, module: Any, inputs: dict[str, torch.Tensor],
                         outputs: dict[str, torch.Tensor], scales: dict[str, torch.Tensor],
                         axes: dict[str, int]) -> dict:
    """Imported problems, whose baseline IS their reference: the outputs against the reference's
    independent float64 formulation, rounded to each output's dtype (docs/importing.md)."""
    try:
        wide = module.independent_reference(inputs, axes)
    except Exception:  # a reference that refuses float64 inputs has no second formulation
        return {}
    rounded = {spec.name: wide[spec.name].reshape(outputs[spec.name].shape).to(getattr(torch, spec.dtype))
               for spec in problem.outputs}
    return _margins(problem, outputs, rounded, scales, axes)


def _time_baseline(problem: Problem, shape: Shape, args: tuple, reps: int = 7) -> float:
    """Median seconds of one baseline call, L2 flushed before each call (CUDA events)."""
    baseline = problem.reference_module().baseline
    kwargs = problem.call_kwargs(shape.axes)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    times = []
    for rep in range(reps + 2):
        flush.fill_(rep)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        baseline(*args, **kwargs)
        end.record()
        torch.cuda.synchronize()
        if rep >= 2:
            times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def load_kernel(path: str) -> Callable[..., None]:
    """``kernel`` of a submission file (an example, say), to check instead of the baseline."""
    spec = importlib.util.spec_from_file_location("selfcheck_submission", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def check_shape(
    problem: Problem,
    shape: Shape,
    seed: int,
    device: str,
    gpu: str | None,
    kernel: Callable[..., None] | None,
) -> list[dict[str, Any]]:
    module = problem.reference_module()
    rows = []
    for distribution in problem.distributions:
        inputs = module.generate_inputs(shape.axes, seed, device, distribution)
        outputs = _outputs(problem, shape, device)
        args = (*inputs.values(), *outputs.values())
        (kernel or module.baseline)(*args, **problem.call_kwargs(shape.axes))
        row: dict[str, Any] = {"problem": problem.name, "shape": shape.shape_id, "distribution": distribution}
        scales = error_scales(problem, module, inputs, shape.axes)
        row["outputs"] = _margins(
            problem, outputs, module.reference(inputs, shape.axes), scales, dict(shape.axes)
        )
        if hasattr(module, "independent_reference"):
            row["independent"] = _independent_margins(
                problem, module, inputs, outputs, scales, dict(shape.axes)
            )
        if device == "cuda" and gpu and kernel is None and distribution == problem.distributions[0]:
            seconds = _time_baseline(problem, shape, args)
            bound = t_sol(problem.counts(shape.axes), get_gpu_spec(gpu))
            row.update(
                baseline_us=seconds * 1e6, t_sol_us=bound.t_sol_us, sol_fraction=bound.t_sol_s / seconds
            )
        rows.append(row)
        del inputs, outputs, args
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", help="Default: every problem.")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gpu", default=None, help="GPU type for t_SOL (h100, h200, b200).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shapes", default="all", choices=["all", "cpu", "quick"])
    parser.add_argument("--kernel", help="Check this submission file's kernel instead of the baseline.")
    args = parser.parse_args(argv)
    kernel = load_kernel(args.kernel) if args.kernel else None
    worst, failures = 0.0, 0
    for name in args.problems or sorted(load_catalogue()):
        problem = get_problem(name)
        if problem.kind == "multi":  # needs a process group: benchmarks/multigpu_h200x2.py checks those
            print(f"{name}: a multi-GPU problem, not checked here (docs/multigpu.md)", file=sys.stderr)
            continue
        device_for_shapes = "cpu" if args.shapes == "cpu" else "cuda"
        for shape in problem.select_shapes(args.shapes if args.shapes != "cpu" else "all", device_for_shapes):
            for row in check_shape(problem, shape, args.seed, args.device, args.gpu, kernel):
                checked = [*row["outputs"].values(), *row.get("independent", {}).values()]
                worst = max([worst, *(o["margin"] for o in checked)])
                failures += sum(not o["passed"] for o in checked)
                print(json.dumps(row), flush=True)
    verdict = "PASS" if failures == 0 else f"FAIL ({failures} outputs below their matched ratio)"
    print(f"worst margin {worst:.3f}; {verdict}", file=sys.stderr)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
