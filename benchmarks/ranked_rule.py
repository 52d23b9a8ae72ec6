"""The ranked-figure rule (``evaluator.scoring.ranked_gpu_us``) replayed on every honest shape the H200
sessions recorded: how often an honest kernel is ranked above its own median (what the rule costs the
honest), and how much a claim rewritten downwards still gains (what it leaves a forger).

    python benchmarks/ranked_rule.py [--record FILE] [--since 2026-12-02T13] [--until 2026-12-05]
                                     [--forged 0.91]

Reads the compact record of runner jobs (``benchmarks/results/data/runner_jobs_h200.json``, made by
``benchmarks/runner_record.py``; its sources run from ``--since`` up to ``--until``): examples and
baselines through a runner, cheats left out. For each ranked shape: the child's median (the honest
claim), ncu's witness and its kernels per call. The forger is the same kernel with its median rewritten
to ``forged`` x the claim; its gain is how far below the honest kernel's ranked time its own ranked time
lands. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.scoring import ranked_gpu_us

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: runner_record beside it
from runner_record import sources_of

RECORD = Path(__file__).resolve().parent / "results" / "data" / "runner_jobs_h200.json"
#: The first runner session on the ranked figure's code paths as they stand (the judge's clock of
#: 52e8e52 and the jobs run with it): the default window.
SINCE = "2026-12-02T13"


@dataclass(frozen=True)
class Shape:
    source: str
    problem: str
    submission: str
    shape: str
    claim_us: float
    witness_us: float
    kernels: int


def honest_shapes(record: Path, since: str, until: str = "") -> list[Shape]:
    data = json.loads(record.read_text())
    dates = {source["label"]: source.get("date") or "" for source in data["sources"]}
    found: list[Shape] = []
    for label, jobs in sources_of(data):
        if dates[label] < since or (until and dates[label] > until):
            continue
        for job in jobs:
            if str(job.get("submission", "")).startswith("cheat"):
                continue
            found.extend(
                Shape(
                    label,
                    job["problem"],
                    job["submission"],
                    item["shape"],
                    float(item["reported_us"]),
                    float(item["witness_us"]),
                    int(item["kernels"]),
                )
                for item in job.get("shapes") or []
                if _honest_and_witnessed(item)
            )
    return found


def _honest_and_witnessed(item: dict[str, Any]) -> bool:
    return bool(item.get("status") == "PASSED" and item.get("ranked") and item.get("witness_us")
                and item.get("reported_us") and item.get("kernels"))


def quantile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[int(fraction * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--since", default=SINCE, help="the earliest source date (ISO, a prefix will do)")
    parser.add_argument("--until", default="", help="the latest source date (a prefix ends before that day)")
    parser.add_argument("--forged", type=float, default=0.91)
    args = parser.parse_args()
    shapes = honest_shapes(args.record, args.since, args.until)
    raised = [ranked_gpu_us(s.claim_us, s.witness_us, s.kernels) / s.claim_us - 1 for s in shapes]
    print(f"{len(shapes)} honest ranked shapes (H200 runner jobs since {args.since})")
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
