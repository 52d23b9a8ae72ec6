"""``python -m evaluator problems [--json]``: the catalogue, as a table or as JSON."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from evaluator.problems import OutputTolerance, Problem, TensorSpec, load_catalogue

HELP = "List the problems of the catalogue with their shapes and flags."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="Print a JSON list instead of a table.")
    output.add_argument(
        "--markdown", action="store_true", help="Print the catalogue table of docs/problems.md."
    )


def problem_summary(problem: Problem) -> dict[str, Any]:
    """Everything the site needs to mirror a problem (metadata, never code), JSON-ready."""
    return {
        "name": problem.name,
        "title": problem.title,
        "description": problem.description,
        "kind": problem.kind,
        "world_size": problem.world_size,
        "world_sizes": list(problem.world_sizes),
        "comm_bytes": problem.comm_bytes_formula,
        "version": problem.version,
        "axes": list(problem.axes),
        "inputs": [asdict(spec) for spec in problem.inputs],
        "outputs": [asdict(spec) for spec in problem.outputs],
        "tolerance": {
            "atol": problem.atol,
            "rtol": problem.rtol,
            "matched_ratio": problem.matched_ratio,
            "per_output": {spec.name: asdict(problem.tolerance_for(spec.name)) for spec in problem.outputs},
        },
        "scalar_args": list(problem.scalar_args),
        "languages": list(problem.languages),
        "distributions": list(problem.distributions),
        "test_seeds": list(problem.test_seeds),
        "baseline": problem.baseline_name,
        "ptx": problem.ptx,
        "shapes": [
            {
                "shape_id": shape.shape_id,
                "axes": dict(shape.axes),
                "ranked": shape.ranked,
                "quick": shape.quick,
                "cpu": shape.cpu,
            }
            for shape in problem.shapes
        ],
    }


def _table(problems: list[Problem]) -> str:
    header = (
        f"{'problem':<20} {'v':>2} {'languages':<16} {'shapes':>6} {'ranked':>6} "
        f"{'quick':>5} {'cpu':>3}  title"
    )
    lines = [header, "-" * len(header)]
    for problem in problems:
        shapes = problem.shapes
        lines.append(
            f"{problem.name:<20} {problem.version:>2} {','.join(problem.languages):<16} "
            f"{len(shapes):>6} {sum(s.ranked for s in shapes):>6} {sum(s.quick for s in shapes):>5} "
            f"{sum(s.cpu for s in shapes):>3}  {problem.title}"
        )
    return "\n".join(lines)


def _tensors(specs: tuple[TensorSpec, ...]) -> str:
    return ", ".join(f"`{s.name}` ({','.join(map(str, s.shape)) or 'scalar'}) {s.dtype}" for s in specs)


_SCALE_TEXT = {"absolute": "", "rms": " x RMS", "row_rms": " x row RMS", "inputs": " x input scale"}


def _tolerance_text(name: str, tolerance: OutputTolerance) -> str:
    text = f"{name}: atol {tolerance.atol:g}{_SCALE_TEXT[tolerance.atol_scale]}, rtol {tolerance.rtol:g}"
    if tolerance.matched_ratio < 1:
        text += f", matched {tolerance.matched_ratio:g}"
    return text


def catalogue_markdown(problems: list[Problem]) -> str:
    """The catalogue table of docs/problems.md (a test keeps the two in step)."""
    lines = [
        "| problem | inputs | outputs | tolerance | languages | shapes (ranked / cpu) |",
        "|---|---|---|---|---|---|",
    ]
    for problem in problems:
        tolerances = "; ".join(
            _tolerance_text(spec.name, problem.tolerance_for(spec.name)) for spec in problem.outputs
        )
        cpu_shapes = len(problem.select_shapes("all", "cpu"))
        shapes = f"{len(problem.shapes)} ({len(problem.ranked_shapes)} / {cpu_shapes})"
        lines.append(
            f"| `{problem.name}` | {_tensors(problem.inputs)} | {_tensors(problem.outputs)} | {tolerances} "
            f"| {', '.join(problem.languages)} | {shapes} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    problems = list(load_catalogue().values())
    if args.json:
        print(json.dumps([problem_summary(problem) for problem in problems], indent=2))
    elif args.markdown:
        print(catalogue_markdown(problems))
    else:
        print(_table(problems))
    return 0
