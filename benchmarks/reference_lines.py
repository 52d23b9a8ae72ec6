"""Reference lines measured on a GPU through the whole site: a site worker and one runner node on the
embedded broker (runner_cluster.Cluster), ``measure_references`` for the chosen problems on the
GPU type the runner reports, every line's evaluation waited for, and what the site stores written
to OUT (docs/references.md).

    python benchmarks/reference_lines.py --out "$OUT" [--problem NAME ...] [--timeout S]

Writes ``reference_lines.json`` (per problem and line: status, status text, the library version
the runner measured, score, speedup, per-shape medians and S, the leading ranked result if any)
and ``reference_lines.md`` (one table). benchmarks/reference_lines_h200.sh sets the machine up.

Expected on an H200 with liger-kernel and flash-attn installed: every ``eager`` line PASSED with a
score of 0.5 +- 0.02 (the contract), every ``torch_compile`` line PASSED, the Liger lines PASSED
with scores above 0.5 where Liger is faster than the eager baseline (issue 37: cross_entropy
0.95-0.96, silu_and_mul 0.94-0.99, rmsnorm 0.85-0.92), none of them in a ranking; a line whose
package is missing shows ``unavailable``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from runner_cluster import Cluster, provenance

#: The problems that have a library line, then a few without (their eager and compiled lines).
DEFAULT_PROBLEMS = [
    "cross_entropy",
    "silu_and_mul",
    "gelu_and_mul",
    "rmsnorm",
    "layernorm",
    "rope",
    "softmax",
    "swiglu",
    "attention_fwd",
]


def measure(problems: list[str], timeout: float) -> dict[str, Any]:
    from leaderboard.models import TERMINAL_STATUSES, Evaluation, Problem, ReferenceLine, RunnerNode
    from leaderboard.reference_lines import measure_references

    node = RunnerNode.objects.filter(gpu_type__isnull=False).select_related("gpu_type").first()
    if node is None or node.gpu_type is None:
        raise RuntimeError("the runner reported no GPU type")
    gpu = node.gpu_type
    chosen = Problem.objects.filter(active=True, kind="single")
    if problems != ["all"]:
        chosen = chosen.filter(name__in=problems)
    done = measure_references(chosen.order_by("name"), [gpu])
    ids = list(
        ReferenceLine.objects.filter(gpu_type=gpu, evaluation__isnull=False).values_list(
            "evaluation_id", flat=True
        )
    )
    deadline = time.monotonic() + timeout
    while Evaluation.objects.filter(pk__in=ids).exclude(status__in=TERMINAL_STATUSES).exists():
        if time.monotonic() > deadline:
            break
        time.sleep(2)
    return {"gpu_type": gpu.key, "submitted": [item.line() for item in done], "lines": lines_of(gpu)}


def lines_of(gpu: Any) -> list[dict[str, Any]]:
    from leaderboard.models import Problem
    from leaderboard.ranking_maintenance import ranking_rows
    from leaderboard.reference_lines import line_rows
    from leaderboard.web.boards import board_shapes

    found = []
    for problem in Problem.objects.filter(reference_lines__gpu_type=gpu).distinct().order_by("name"):
        shapes = [shape.pk for shape in board_shapes(problem, gpu)]
        leaders = ranking_rows(problem, gpu, None, 1)
        for line in line_rows(problem, gpu, None, shapes):
            found.append(
                {
                    "problem": problem.name,
                    **line.body(),
                    "leader_score": leaders[0].score if leaders else None,
                }
            )
    return found


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| problem | line | status | versions | score | speedup | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for line in result["lines"]:
        versions = ", ".join(f"{k} {v}" for k, v in line["versions"].items())
        score = f"{line['score']:.3f}" if line["score"] is not None else "-"
        speedup = f"{line['speedup']:.2f}x" if line["speedup"] is not None else "-"
        note = "" if line["status"] == "measured" else line["status_text"][:120].replace("|", "/")
        rows.append(
            f"| {line['problem']} | {line['label']} | {line['status']} | {versions} | {score} | {speedup} | "
            f"{note} |"
        )
    return f"Reference lines on {result['gpu_type']}\n\n" + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--problem",
        action="append",
        dest="problems",
        help=f"a problem (repeat; 'all' for every single-GPU problem); default: {DEFAULT_PROBLEMS}",
    )
    parser.add_argument("--timeout", type=float, default=480, help="seconds to wait for the lines' jobs")
    parser.add_argument("--device", default="0", help="runner --device (cpu for a dry run without a GPU)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(runners=1, device=args.device, keep=True, loglevel="INFO",
                      env={"SOLBOARD_JOB_TEST_SECONDS": "600", "SOLBOARD_JOB_RANKED_SECONDS": "900"})
    summary: dict[str, Any] = {"provenance": provenance(), "folder": str(cluster.folder)}
    try:
        with cluster:
            cluster.wait_for_runners(timeout=600)
            summary |= measure(args.problems or DEFAULT_PROBLEMS, args.timeout)
    finally:
        (args.out / "reference_lines.json").write_text(json.dumps(summary, indent=2, default=str))
    (args.out / "reference_lines.md").write_text(markdown(summary))
    print(markdown(summary))


if __name__ == "__main__":
    main()
