"""How a baseline's margin moves with the seed: the self-check's figures over many seeds.

The self-check and the baseline audit measure margins at one seed; a job draws a secret seed, so a
baseline whose worst element sits near its tolerance fails some jobs and not others. This script
runs each named variant of a problem's reference module (its ``baseline`` and the older versions
kept beside it, e.g. mla_decode's ``fp32_copies_baseline``) on the same inputs for SEEDS seeds and
every distribution, and writes, per (variant, distribution, seed), the worst margin (max error over
the allowed error), the number of elements outside the tolerance and the worst one.

    python3 benchmarks/seed_margins.py mla_decode b64_h128_s8192_t262144 \\
        --variants baseline,fp32_copies_baseline --seeds 16 --device cuda --out margins.json
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _bench beside it

from _bench import Benchmark, perf_report, provenance, write_json

from evaluator.harness.correctness import allocate_outputs
from evaluator.harness.work import error_scales
from evaluator.problems import get_problem


def outside(
    problem: Any, name: str, out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor | None
) -> dict[str, Any]:
    tolerance = problem.tolerance_for(name)
    ref, out = ref.double(), out.double()
    allowed = torch.broadcast_to(
        tolerance.allowed_error(ref, None if scale is None else scale.double()), ref.shape
    )
    error = (out - ref).abs()
    ratio = torch.where(error == 0, 0.0, error / allowed)
    ratio = torch.where(torch.isfinite(out), ratio, torch.inf)
    worst = int(ratio.argmax())
    index = list(torch.unravel_index(torch.tensor(worst), ref.shape))
    return {
        "margin": float(ratio.max()),
        "outside": int((ratio > 1).sum()),
        "elements": ref.numel(),
        "worst": {
            "index": [int(i) for i in index],
            "got": float(out.reshape(-1)[worst]),
            "expected": float(ref.reshape(-1)[worst]),
            "allowed": float(allowed.reshape(-1)[worst]),
        },
    }


def margins_benchmark(problem: Any, shape: Any, variants: list[str], seeds: int, device: str) -> Benchmark:
    """The declared grid: every distribution at SEEDS random 48-bit seeds (as a job's secret seed);
    each point runs every variant on the same inputs, so its rows compare like with like."""
    points = [
        (distribution, secrets.randbits(48)) for distribution in problem.distributions for _ in range(seeds)
    ]
    return Benchmark("seed_margins", x_names=("distribution", "seed"), x_vals=points,
                     args={"problem": problem, "shape": shape, "variants": tuple(variants), "device": device})


def variant_margins(problem: Any, shape: Any, variants: tuple[str, ...], device: str, distribution: str,
                    seed: int) -> list[dict[str, Any]]:
    """One point: the inputs of (distribution, seed), then each variant's worst margin per output."""
    module = problem.reference_module()
    inputs = module.generate_inputs(shape.axes, seed, device, distribution)
    reference = module.reference(inputs, shape.axes)
    scales = error_scales(problem, module, inputs, shape.axes)
    rows = []
    for name in variants:
        outputs = allocate_outputs(problem.outputs, shape.axes, device)
        getattr(module, name)(*inputs.values(), *outputs.values(), **problem.call_kwargs(shape.axes))
        rows.append(
            {
                "variant": name,
                "outputs": {
                    key: outside(problem, key, outputs[key], ref, scales.get(key))
                    for key, ref in reference.items()
                },
            }
        )
    return rows


def summary_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant and distribution: seeds run, seeds with an element outside, the worst margin."""
    summary: dict[str, Any] = {}
    for row in rows:
        entry = summary.setdefault(
            f"{row['variant']}/{row['distribution']}", {"seeds": 0, "failed": 0, "worst": 0.0}
        )
        entry["seeds"] += 1
        entry["failed"] += any(o["outside"] for o in row["outputs"].values())
        entry["worst"] = max(entry["worst"], *(o["margin"] for o in row["outputs"].values()))
    return summary


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("shape")
    parser.add_argument(
        "--variants", default="baseline", help="functions of the reference module, comma-separated"
    )
    parser.add_argument("--seeds", type=int, default=16, help="random 48-bit seeds, as a job's secret seed")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True, help="JSON file, rewritten after every seed")
    args = parser.parse_args()
    problem = get_problem(args.problem)
    benchmark = margins_benchmark(problem, problem.shape(args.shape), args.variants.split(","), args.seeds,
                                  args.device)
    header = provenance(args.device)

    def keep(rows: list[dict[str, Any]]) -> None:
        for row in rows[-len(benchmark.args["variants"]):]:
            print(
                json.dumps(
                    {key: row[key] for key in ("variant", "distribution", "seed")}
                    | {key: (o["margin"], o["outside"]) for key, o in row["outputs"].items()}
                ),
                flush=True,
            )
        write_json(args.out, {"problem": args.problem, "shape": args.shape, "summary": summary_of(rows),
                              "rows": rows}, header)

    mark = perf_report(benchmark)(variant_margins)
    rows = mark.run(print_data=False, on_rows=keep)[benchmark.name]
    print(json.dumps(summary_of(rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
