"""``python -m evaluator problems [--json]``: the catalogue, as a table or as JSON."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from evaluator.problems import Problem, load_catalogue

HELP = "List the problems of the catalogue with their shapes and flags."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="Print a JSON list instead of a table.")


def problem_summary(problem: Problem) -> dict[str, Any]:
    """Everything the site needs to mirror a problem (metadata, never code), JSON-ready."""
    return {
        "name": problem.name,
        "title": problem.title,
        "description": problem.description,
        "kind": problem.kind,
        "world_size": problem.world_size,
        "version": problem.version,
        "axes": list(problem.axes),
        "inputs": [asdict(spec) for spec in problem.inputs],
        "outputs": [asdict(spec) for spec in problem.outputs],
        "tolerance": {
            "atol": problem.atol,
            "rtol": problem.rtol,
            "matched_ratio": problem.matched_ratio,
        },
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
    header = f"{'problem':<20} {'v':>2} {'languages':<16} {'shapes':>6} {'ranked':>6} {'quick':>5} {'cpu':>3}  title"
    lines = [header, "-" * len(header)]
    for problem in problems:
        shapes = problem.shapes
        lines.append(
            f"{problem.name:<20} {problem.version:>2} {','.join(problem.languages):<16} "
            f"{len(shapes):>6} {sum(s.ranked for s in shapes):>6} {sum(s.quick for s in shapes):>5} "
            f"{sum(s.cpu for s in shapes):>3}  {problem.title}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    problems = list(load_catalogue().values())
    if args.json:
        print(json.dumps([problem_summary(problem) for problem in problems], indent=2))
    else:
        print(_table(problems))
    return 0
