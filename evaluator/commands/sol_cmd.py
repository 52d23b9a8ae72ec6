"""``python -m evaluator sol PROBLEM --gpu h200 [--world-size N] [--json]``: exact counts and
the speed of light of every shape of a problem on one GPU type, from datasheet peaks."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evaluator.gpu_specs import GpuSpecError, get_gpu_spec, load_gpu_specs
from evaluator.problems import CatalogueError, Problem, Shape, get_problem
from evaluator.sol import has_counts, t_sol

HELP = "Print flops by class, bytes, comm bytes, t_SOL (us) and the bound of every shape."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    gpus = sorted(key for key, spec in load_gpu_specs().items() if not spec.development_device)
    parser.add_argument("problem", help="Problem name (see `python -m evaluator problems`).")
    parser.add_argument("--gpu", required=True, choices=gpus, help="GPU type of gpus.toml.")
    parser.add_argument("--world-size", type=int, default=1, help="GPUs per call (multi-GPU problems).")
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")


def shape_sol(problem: Problem, shape: Shape, gpu: str, world_size: int) -> dict[str, Any]:
    axes = dict(shape.axes)
    if problem.kind == "multi":
        axes.setdefault("world_size", world_size)
    counts = problem.counts(axes)
    if not has_counts(counts):
        return {
            "shape_id": shape.shape_id,
            "axes": dict(shape.axes),
            "ranked": shape.ranked,
            "flops": {},
            "bytes": 0.0,
            "comm_bytes": 0.0,
            "t_sol_us": None,
            "bound": "no counts",
            "t_compute_us": None,
            "t_memory_us": None,
            "t_link_us": None,
        }
    bound = t_sol(counts, get_gpu_spec(gpu), world_size)
    return {
        "shape_id": shape.shape_id,
        "axes": dict(shape.axes),
        "ranked": shape.ranked,
        "flops": dict(counts.flops),
        "bytes": counts.bytes,
        "comm_bytes": counts.comm_bytes,
        "t_sol_us": bound.t_sol_us,
        "bound": bound.bound,
        "t_compute_us": bound.t_compute_s * 1e6,
        "t_memory_us": bound.t_memory_s * 1e6,
        "t_link_us": bound.t_link_s * 1e6,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    header = f"{'shape':<28} {'ranked':>6} {'flops':>40} {'bytes':>12} {'comm':>8} {'t_SOL us':>11} bound"
    lines = [header, "-" * len(header)]
    for row in rows:
        flops = ", ".join(f"{c}={v:.3g}" for c, v in row["flops"].items() if v) or "0"
        if row["t_sol_us"] is None:
            lines.append(f"{row['shape_id']:<28} {str(row['ranked']).lower():>6} {'no counts':>40}")
            continue
        lines.append(
            f"{row['shape_id']:<28} {str(row['ranked']).lower():>6} {flops:>40} {row['bytes']:>12.4g} "
            f"{row['comm_bytes']:>8.3g} {row['t_sol_us']:>11.3f} {row['bound']}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        problem = get_problem(args.problem)
        if problem.kind == "single" and args.world_size != 1:
            raise CatalogueError(f"{problem.name} is a single-GPU problem: --world-size must be 1")
        rows = [shape_sol(problem, shape, args.gpu, args.world_size) for shape in problem.shapes]
    except (CatalogueError, GpuSpecError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {"problem": problem.name, "gpu": args.gpu, "world_size": args.world_size, "shapes": rows},
                indent=2,
            )
        )
    else:
        print(f"{problem.name} on {get_gpu_spec(args.gpu).name} (datasheet peaks)")
        print(_table(rows))
    return 0
