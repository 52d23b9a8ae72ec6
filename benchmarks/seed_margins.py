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

from evaluator.harness.correctness import allocate_outputs
from evaluator.harness.work import error_scales
from evaluator.problems import get_problem


def outside(problem: Any, name: str, out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor | None) -> dict[str, Any]:
    tolerance = problem.tolerance_for(name)
    ref, out = ref.double(), out.double()
    allowed = torch.broadcast_to(tolerance.allowed_error(ref, None if scale is None else scale.double()), ref.shape)
    error = (out - ref).abs()
    ratio = torch.where(error == 0, 0.0, error / allowed)
    ratio = torch.where(torch.isfinite(out), ratio, torch.inf)
    worst = int(ratio.argmax())
    index = list(torch.unravel_index(torch.tensor(worst), ref.shape))
    return {"margin": float(ratio.max()), "outside": int((ratio > 1).sum()), "elements": ref.numel(),
            "worst": {"index": [int(i) for i in index], "got": float(out.reshape(-1)[worst]),
                      "expected": float(ref.reshape(-1)[worst]), "allowed": float(allowed.reshape(-1)[worst])}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("shape")
    parser.add_argument("--variants", default="baseline", help="functions of the reference module, comma-separated")
    parser.add_argument("--seeds", type=int, default=16, help="random 48-bit seeds, as a job's secret seed")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    problem = get_problem(args.problem)
    shape = problem.shape(args.shape)
    module = problem.reference_module()
    variants = {name: getattr(module, name) for name in args.variants.split(",")}
    rows = []
    for distribution in problem.distributions:
        for _ in range(args.seeds):
            seed = secrets.randbits(48)
            inputs = module.generate_inputs(shape.axes, seed, args.device, distribution)
            reference = module.reference(inputs, shape.axes)
            scales = error_scales(problem, module, inputs, shape.axes)
            for name, function in variants.items():
                outputs = allocate_outputs(problem.outputs, shape.axes, args.device)
                function(*inputs.values(), *outputs.values(), **problem.call_kwargs(shape.axes))
                row = {"variant": name, "distribution": distribution, "seed": seed,
                       "outputs": {key: outside(problem, key, outputs[key], ref, scales.get(key))
                                   for key, ref in reference.items()}}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "outputs"}
                                 | {key: (o["margin"], o["outside"]) for key, o in row["outputs"].items()}), flush=True)
            del inputs, reference
    summary: dict[str, Any] = {}
    for row in rows:
        entry = summary.setdefault(f"{row['variant']}/{row['distribution']}", {"seeds": 0, "failed": 0, "worst": 0.0})
        entry["seeds"] += 1
        entry["failed"] += any(o["outside"] for o in row["outputs"].values())
        entry["worst"] = max(entry["worst"], *(o["margin"] for o in row["outputs"].values()))
    args.out.write_text(json.dumps({"problem": args.problem, "shape": args.shape, "summary": summary, "rows": rows},
                                   indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
