"""Helpers (no tests) that build runner reports for the site's tests from a real CPU report.

- ``with_witness``: what the harness adds to a ranked report once each shape's median is
  confirmed (docs/security.md): a ``judge_wall`` witness per passed shape and ``witnessed``.
- ``gpu_report``: an H200 report of vector_add as the evaluator would assemble it for given
  kernel and baseline medians (as multiples of each shape's t_SOL): the measurements are chosen,
  every derived figure comes from the evaluator's own functions (scoring.sol_figures).
- ``signed``: a message signed the way a runner node signs it.
"""

from __future__ import annotations

import copy
from typing import Any

from evaluator.gpu_specs import get_gpu_spec
from evaluator.problems import get_problem
from evaluator.scoring import problem_score, sol_figures
from evaluator.sol import t_sol
from solboard_common.signing import Credential, sign

TIMES = ("median_us", "mean_us", "min_us", "max_us", "std_us", "ci95_low_us", "ci95_high_us")


def witness_of(shape: dict[str, Any], confirmed: bool = True) -> dict[str, Any]:
    median = shape["timing"]["median_us"]
    return {"source": "judge_wall", "median_us": median, "n": 20, "floor_us": median * 0.5,
            "confirmed": confirmed, "message": ""}


def with_witness(report: dict[str, Any], confirmed: bool = True) -> dict[str, Any]:
    report = copy.deepcopy(report)
    for shape in report["shapes"]:
        if shape["status"] == "PASSED" and shape.get("timing"):
            shape["witness"] = shape.get("witness") or witness_of(shape, confirmed)
    report["witnessed"] = confirmed
    return report


def _timing_at(template: dict[str, Any], median_us: float, method: str = "cupti") -> dict[str, Any]:
    factor = median_us / template["median_us"]
    timing = {**template, **{name: template[name] * factor for name in TIMES}}
    timing.update(median_us=median_us, method=method, ranked_source="device_span", cold_l2=True)
    return timing


def gpu_report(cpu_report: dict[str, Any], kernel_over_sol: float = 1.5, baseline_over_sol: float = 2.0,
               witnessed: bool = True) -> dict[str, Any]:
    problem, spec = get_problem("vector_add"), get_gpu_spec("h200")
    template, shapes, ranked_scores = cpu_report["shapes"][0], [], []
    for shape in problem.select_shapes("all", "cuda"):
        counts = problem.counts(shape.axes)
        sol_us = t_sol(counts, spec).t_sol_us
        item = copy.deepcopy(template)
        item.update(shape_id=shape.shape_id, axes=dict(shape.axes), ranked=shape.ranked)
        item.pop(
            "ranked_time", None
        )  # the CPU run's; the site computes each shape's own from its measurements
        item["timing"] = _timing_at(template["timing"], kernel_over_sol * sol_us)
        item["baseline_timing"] = _timing_at(template["baseline_timing"], baseline_over_sol * sol_us)
        figures = sol_figures(counts, spec, item["timing"]["median_us"] * 1e-6,
                              item["baseline_timing"]["median_us"] * 1e-6)
        item["sol"] = figures.model_dump(mode="json")
        item["witness"] = witness_of(item) if witnessed else None
        shapes.append(item)
        if shape.ranked:
            ranked_scores.append(figures.score)
    device = {**cpu_report["device"], "kind": "cuda", "name": "NVIDIA H200", "gpu_type": "h200",
              "development_device": False}
    return {**cpu_report, "device": device, "shapes": shapes, "flags": [], "witnessed": witnessed,
            "problem_score": problem_score(ranked_scores), "rank_eligible": witnessed,
            "message": f"all {len(shapes)} shapes passed"}


def signed(
    task: str, body: dict[str, Any], credential: Credential, now: float | None = None
) -> dict[str, Any]:
    return sign(task, body, credential, now)
