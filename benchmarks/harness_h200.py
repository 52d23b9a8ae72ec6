"""Summarise ``python -m evaluator run --json`` reports for the H200 checks of issue 33 (items 4, 5,
7, 8; benchmarks/harness_h200.sh runs them): one line per shape with the child's median (its claim),
ncu's witness, the ranked time and the status, and one line per report with its wall time.

    python benchmarks/harness_h200.py REPORT.json [...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summary(path: Path) -> list[str]:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return [f"{path.name}: no report ({error})"]
    head = (
        f"{path.name}: {report['status']} in {report['wall_seconds']:.1f} s, "
        f"witnessed {report['witnessed']}, rank_eligible {report['rank_eligible']}, "
        f"score {report['problem_score']}: {report['message'][:200]}"
    )
    lines = [head]
    for shape in report["shapes"]:
        timing, witness, ranked = (
            shape.get("timing") or {},
            shape.get("witness") or {},
            shape.get("ranked_time") or {},
        )
        claim, seen, kernel = timing.get("median_us"), witness.get("median_us"), ranked.get("kernel_us")
        ratio = f"{claim / seen:.3f}" if claim and seen else "-"
        lines.append(
            f"  {shape['shape_id']:32} {shape['status']:20} claim {claim} witness {seen} "
            f"(claim/witness {ratio}, {witness.get('kernels_per_call')} kernels, "
            f"calls {witness.get('calls_us')}) "
            f"ranked {kernel} baseline {ranked.get('baseline_us')} "
            f"score {(shape.get('sol') or {}).get('score')} "
            f"{shape.get('message', '')[:160]}"
        )
    return lines


def main(paths: list[str]) -> int:
    for name in paths:
        print("\n".join(summary(Path(name))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
