"""Plain-text output: tables that line up, numbers people can read, a live line on terminals."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO = sys.stdout) -> None:
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) if cells else len(str(h))
              for i, h in enumerate(headers)]
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), file=out)
    for row in cells:
        print("  ".join(value.ljust(w) for value, w in zip(row, widths, strict=True)).rstrip(), file=out)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def as_json(value: Any, out: TextIO = sys.stdout) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str), file=out)


def evaluation_line(evaluation: dict[str, Any]) -> str:
    """One evaluation as people see it: within its submission ("submission 12, cpu ranked run 1"),
    never by the evaluation's own id, which the commands do not take."""
    label = evaluation.get("label") or (f"{evaluation['gpu_type']} {evaluation['mode']} "
                                        f"run {evaluation['run_number']}")
    text = f"{label}: {evaluation['status']}"
    if evaluation.get("queue_position") is not None:
        text += f" (position {evaluation['queue_position']} in the {evaluation['gpu_type']} queue)"
    if evaluation.get("runners_online") == 0:
        text += f" - no {evaluation['gpu_type']} runner online"
    if evaluation.get("evaluator_status"):
        text += f" [{evaluation['evaluator_status']}]"
    if evaluation.get("score") is not None:
        text += f" score {evaluation['score']:.4f}"
        if evaluation.get("development_device"):
            text += " (CPU development board)"
    if evaluation.get("provisional"):
        text += " (provisional)"
    return text


def submission_report(body: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """Each evaluation with its message, per-shape table and why it is not ranked."""
    agent = body.get("agent")
    label = f" by agent {agent['name']}" if agent and agent.get("name") else ""
    print(f"submission {body['id']}: {body['problem']} ({body['language']}){label}: {body['status']}", file=out)
    for evaluation in body["evaluations"]:
        print(file=out)
        print(evaluation_line(evaluation), file=out)
        if evaluation.get("message"):
            print(f"  {evaluation['message'].strip()[:2000]}", file=out)
        if evaluation.get("shapes"):
            shapes_table(evaluation["shapes"], out)
        if evaluation.get("not_ranked_reason") and evaluation["status"] not in ("queued", "running"):
            print(f"  not ranked: {evaluation['not_ranked_reason']}", file=out)


def shapes_table(shapes: list[dict[str, Any]], out: TextIO = sys.stdout) -> None:
    rows = [(s["shape_id"], s["status"], s.get("median_us"), s.get("baseline_median_us"), s.get("t_sol_us"),
             s.get("sol_fraction"), s.get("bound"), s.get("score")) for s in shapes]
    table(["shape", "status", "median_us", "baseline_us", "t_sol_us", "sol", "bound", "score"], rows, out)
    for shape in shapes:
        for worst in shape.get("worst_elements", [])[:3]:
            print(f"  {shape['shape_id']}: {worst.get('output')}{worst.get('index')} expected "
                  f"{worst.get('expected')} got {worst.get('got')}", file=out)


class Progress:
    """One rewritten line on a terminal; a plain line per change otherwise (logs, CI)."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out, self.live, self.last = out, out.isatty(), ""

    def show(self, text: str) -> None:
        if self.live:
            print("\r\033[K" + text, end="", file=self.out, flush=True)
        elif text != self.last:
            print(text, file=self.out, flush=True)
        self.last = text

    def done(self) -> None:
        if self.live and self.last:
            print(file=self.out, flush=True)
