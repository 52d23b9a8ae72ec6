"""Derived counts against hand counts and against SOLAR: how close is an imported problem's
automatic speed of light to the ones people computed?

    python benchmarks/derived_counts_check.py IMPORTED_DIR [--solar DATASET_DIR] [--out FILE.json]

``IMPORTED_DIR`` holds problems imported from SOL-ExecBench (``import-problems --out``). With
``--solar``, a tree of dataset problems whose ``metadata.json`` carries SOLAR's per-workload
speed of light on the B200 (``sol.per_workload[].sol_ms``, as the public mirror of the dataset
publishes it): every imported shape that is one of those workloads is compared, derived t_SOL on
the B200 (datasheet peaks, evaluator/gpus.toml) over SOLAR's. Pure arithmetic on counts.py (no
torch); prints a summary and writes every row to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from evaluator.gpu_specs import get_gpu_spec
from evaluator.problems import load_problem
from evaluator.sol import has_counts, t_sol


def _workloads(solar_root: Path) -> dict[str, list[dict[str, Any]]]:
    """SOLAR's rows by definition name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for metadata in sorted(solar_root.glob("*/metadata.json")):
        meta = json.loads(metadata.read_text())
        definition = json.loads((metadata.parent / "definition.json").read_text())
        sol = meta.get("sol") or {}
        if sol.get("available") and not sol.get("sol_is_dummy"):
            found[str(definition["name"])] = list(sol.get("per_workload") or [])
    return found


def _rows(folder: Path, solar: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    problem = load_problem(folder)
    if problem.imported.get("counts") != "derived":
        return []
    spec = get_gpu_spec("b200")
    rows = []
    for item in solar.get(str(problem.imported.get("upstream_name")), []):
        axes = {name: int(value) for name, value in item["axes"].items() if name in problem.axes}
        shape = next(
            (shape for shape in problem.shapes if all(shape.axes.get(k) == v for k, v in axes.items())), None
        )
        if shape is None or not shape.ranked:
            continue
        counts = problem.counts(dict(shape.axes))
        if not has_counts(counts):
            continue
        bound = t_sol(counts, spec)
        solar_us = float(item["sol_ms"]) * 1e3
        rows.append({"problem": problem.name, "shape": shape.shape_id, "derived_us": bound.t_sol_us,
                     "solar_us": solar_us, "ratio": bound.t_sol_us / solar_us if solar_us > 0 else None,
                     "bound": bound.bound, "flops": counts.flops, "bytes": counts.bytes})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = sorted(row["ratio"] for row in rows if row["ratio"])
    if not ratios:
        return {"shapes": 0}
    within = sum(0.5 <= ratio <= 2.0 for ratio in ratios)
    return {"shapes": len(ratios), "problems": len({row["problem"] for row in rows}),
            "median_ratio": statistics.median(ratios), "p10": ratios[len(ratios) // 10],
            "p90": ratios[(9 * len(ratios)) // 10], "within_2x": within / len(ratios),
            "above_solar": sum(ratio > 1.0 for ratio in ratios) / len(ratios)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("imported", type=Path)
    parser.add_argument("--solar", type=Path, help="dataset problems with metadata.json (SOLAR's figures)")
    parser.add_argument("--out", type=Path, help="write every row here (JSON)")
    args = parser.parse_args(argv)
    solar = _workloads(args.solar) if args.solar else {}
    rows = [
        row
        for folder in sorted(p.parent for p in args.imported.glob("*/problem.toml"))
        for row in _rows(folder, solar)
    ]
    result = {"summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"], indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
