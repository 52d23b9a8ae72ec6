"""The ranked-figure rule (``evaluator.scoring.ranked_gpu_us``) replayed on every honest shape the H200
rounds recorded: how often an honest kernel is ranked above its own median (what the rule costs the
honest), and how much a claim rewritten downwards still gains (what it leaves a forger).

    python benchmarks/ranked_rule.py [--from-round 10] [--forged 0.91]

Reads ``benchmarks/results/h200_round*/**/runner_*.json`` (examples and baselines through a runner,
cheats left out). For each ranked shape: the child's median (the honest claim), ncu's witness and its
kernels per call. The forger is the same kernel with its median rewritten to ``forged`` x the claim;
its gain is how far below the honest kernel's ranked time its own ranked time lands. Prints a table;
writes nothing.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from evaluator.scoring import ranked_gpu_us

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Shape:
    round: int
    problem: str
    submission: str
    shape: str
    claim_us: float
    witness_us: float
    kernels: int


def honest_shapes(from_round: int) -> list[Shape]:
    found = []
    for path in sorted(RESULTS.glob("h200_round*/**/runner_*.json")):
        number = int(path.relative_to(RESULTS).parts[0].removeprefix("h200_round"))
        if number < from_round:
            continue
        for job in json.loads(path.read_text()).get("results", []):
            if str(job.get("submission", "")).startswith("cheat"):
                continue
            for item in job.get("shapes") or []:
                if item.get("status") == "PASSED" and item.get("ranked") and item.get("witness_us") \
                        and item.get("reported_us") and item.get("kernels"):
                    found.append(Shape(number, job["problem"], job["submission"], item["shape"],
                                       float(item["reported_us"]), float(item["witness_us"]), int(item["kernels"])))
    return found


def quantile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[int(fraction * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from-round", type=int, default=10)
    parser.add_argument("--forged", type=float, default=0.91)
    args = parser.parse_args()
    shapes = honest_shapes(args.from_round)
    raised = [ranked_gpu_us(s.claim_us, s.witness_us, s.kernels) / s.claim_us - 1 for s in shapes]
    print(f"{len(shapes)} honest ranked shapes (H200 rounds {args.from_round}+)")
    for bound in (0.005, 0.01, 0.03, 0.1):
        print(f"  ranked more than {bound:.1%} above their own median: {sum(r > bound for r in raised)}")
    print(f"  largest: {max(raised):.1%}")
    for label, chosen in (("one kernel", [s for s in shapes if s.kernels == 1]), ("every", shapes)):
        long = [s for s in chosen if s.claim_us >= 20]
        gains = [1 - ranked_gpu_us(s.claim_us * args.forged, s.witness_us, s.kernels)
                 / ranked_gpu_us(s.claim_us, s.witness_us, s.kernels) for s in long]
        print(f"{label} call, >= 20 us ({len(long)} shapes): a claim rewritten to {args.forged} x gains "
              f"> 1% on {sum(g > 0.01 for g in gains)}, median {quantile(gains, 0.5):.2%}, "
              f"p90 {quantile(gains, 0.9):.2%}, max {max(gains):.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
