"""Plain-text output: tables that line up, numbers people can read, a live line on terminals."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
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


def as_json(value: Any, out: TextIO | None = None) -> None:
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


def problem(body: dict[str, Any], out: TextIO | None = None) -> None:
    print(
        f"{body['name']}: {body['title']} "
        f"(version {body['version']}, languages {', '.join(body['languages'])})",
        file=out,
    )
    print(f"baseline: {body['baseline']}\n", file=out)
    gpus = sorted({key for shape in body["shapes"] for key, sol in shape["t_sol"].items() if sol})
    rows = [(s["shape_id"], "yes" if s["ranked"] else "no",
             *(f"{s['t_sol'][g]['t_sol_us']:.4g} ({s['t_sol'][g]['bound']})" if s["t_sol"].get(g) else None
               for g in gpus)) for s in body["shapes"]]
    table(["shape", "ranked", *(f"t_sol_us {g}" for g in gpus)], rows, out)


def status(body: dict[str, Any], out: TextIO | None = None) -> None:
    print(f"submission {body['id']}: {body['status']}", file=out)
    for evaluation in body["evaluations"]:
        print("  " + evaluation_line(evaluation), file=out)


def boards(found: list[dict[str, Any]], out: TextIO | None = None, references: bool = False) -> None:
    for board in found:
        title = f"{board['problem']} v{board['version']} on {board['gpu_type']}" + (
            f", shape {board['shape']}" if board["shape"] else "")
        print(f"{title} ({board['count']} ranked, track {board['track']})", file=out)
        table(["rank", "user", "agent", "submission", "score", "median_us", "language"],
              [(r["rank"], r["user"], (r["agent"] or {}).get("name"), r["submission_id"], r["score"],
                r["median_us"], r["language"]) for r in board["results"]], out)
        if references:
            reference_lines(board.get("references", []), out)
        print(file=out)


def reference_lines(lines: list[dict[str, Any]], out: TextIO | None = None) -> None:
    """A board's reference lines: labelled, never ranked (one shape's figures on a shape's board)."""
    if not lines:
        print("reference lines: none measured here yet", file=out)
        return
    print("reference lines (measured like submissions, never ranked):", file=out)
    rows = []
    for line in lines:
        shape = line["shapes"][0] if len(line["shapes"]) == 1 else {}
        versions = ", ".join(f"{name} {value}" for name, value in line["versions"].items())
        rows.append((line["label"], line["status"], line["score"], line["speedup"], shape.get("median_us"),
                     versions, line["submission_id"]))
    table(["line", "status", "score", "speedup", "median_us", "measured with", "submission"], rows, out)


def checked(
    name: str, problem_name: str, gpus: list[str], answer: dict[str, Any], out: TextIO | None = None
) -> None:
    print(f"{name}: accepted for {problem_name} on {', '.join(gpus)} ({answer['language']})", file=out)
    if answer.get("quota"):
        print(f"note: a submission now would be refused: {answer['quota']}", file=out)


def submission_report(body: dict[str, Any], out: TextIO | None = None) -> None:
    """Each evaluation with its message, per-shape table and why it is not ranked."""
    agent = body.get("agent")
    label = f" by agent {agent['name']}" if agent and agent.get("name") else ""
    print(
        f"submission {body['id']}: {body['problem']} ({body['language']}){label}: {body['status']}", file=out
    )
    for evaluation in body["evaluations"]:
        print(file=out)
        print(evaluation_line(evaluation), file=out)
        if evaluation.get("message"):
            print(f"  {evaluation['message'].strip()[:2000]}", file=out)
        if evaluation.get("shapes"):
            shapes_table(evaluation["shapes"], out)
        if evaluation.get("not_ranked_reason") and evaluation["status"] not in ("queued", "running"):
            print(f"  not ranked: {evaluation['not_ranked_reason']}", file=out)


def shapes_table(shapes: list[dict[str, Any]], out: TextIO | None = None) -> None:
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


SUMMARY_KEYS = (
    "id",
    "submission_id",
    "label",
    "gpu_type",
    "mode",
    "run_number",
    "status",
    "evaluator_status",
    "queue_position",
    "runners_online",
    "score",
    "rank_eligible",
    "provisional",
)


def evaluation_summary(evaluation: dict[str, Any]) -> dict[str, Any]:
    """An evaluation's fields a status event carries (no report, no per-shape table)."""
    return {key: evaluation.get(key) for key in SUMMARY_KEYS}


def profiles(body: dict[str, Any], out: TextIO | None = None) -> None:
    """Each shape's Nsight Compute profile from the reports (``--mode profile``), or why there is none."""
    for evaluation in body["evaluations"]:
        print(f"\nprofile: {evaluation_line(evaluation)}", file=out)
        if evaluation.get("development_device"):
            print(
                "  none: the CPU development device has no Nsight Compute (GPU runners profile with ncu)",
                file=out,
            )
            continue
        shapes = (evaluation.get("report") or {}).get("shapes") or []
        if not shapes:
            print("  no report with shapes (the evaluation did not pass its timing stage)", file=out)
        for shape in shapes:
            profile = shape.get("profile") or {}
            if not profile.get("available"):
                reason = profile.get("reason") or "no profile in the report"
                print(f"  {shape.get('shape_id')}: none: {reason}", file=out)
                continue
            rows = [
                (
                    k.get("name", "")[:60],
                    k.get("duration_us"),
                    k.get("sm_throughput_pct"),
                    k.get("dram_throughput_pct"),
                    k.get("achieved_occupancy_pct"),
                    k.get("registers_per_thread"),
                    ", ".join(
                        f"{s.get('reason')} {s.get('percent')}%" for s in (k.get("top_stalls") or [])[:3]
                    ),
                )
                for k in profile.get("kernels") or []
            ]
            print(f"  {shape.get('shape_id')} ({profile.get('tool', 'ncu')}):", file=out)
            table(["kernel", "us", "sm_%", "dram_%", "occupancy_%", "regs", "top stalls"], rows, out)


def submission_rows(page: dict[str, Any], out: TextIO | None = None) -> None:
    """Your submissions, one row each, with each evaluation's status and score."""
    rows = [(item["id"], item["problem"], item["language"], str(item["created_at"])[:16].replace("T", " "),
             item["status"], "; ".join(f"{e['gpu_type']} {e['mode']} run {e['run_number']}: {e['status']}"
                                       + (f" {e['score']:.4f}" if e.get("score") is not None else "")
                                       for e in item["evaluations"]))
            for item in page["results"]]
    table(["submission", "problem", "language", "created (UTC)", "status", "evaluations"], rows, out)
    print(f"{page['count']} submission(s)" + (" (more: --page)" if page.get("next") else ""), file=out)


def quotas(body: dict[str, Any], out: TextIO | None = None) -> None:
    queued = body["queued"]
    print(
        f"queued or running at once: {queued['used']} of {queued['limit']} ({queued['left']} left)", file=out
    )
    daily = body["daily_per_problem"]
    print(f"per problem and GPU type per UTC day: {daily['default_limit']} by default; "
          f"resets at {daily['resets_at']}", file=out)
    rows = [(row.get("problem"), row.get("gpu_type"), row.get("used"), row.get("limit"), row.get("left"))
            for row in daily.get("used", [])]
    if rows:
        table(["problem", "gpu_type", "used today", "limit", "left"], rows, out)
    gpu = body.get("gpu_seconds")
    if gpu:
        print(f"GPU time ({gpu.get('definition', 'GPU-seconds')}):", file=out)
        _gpu_seconds_line("you", gpu, out)
        if gpu.get("token"):
            _gpu_seconds_line(f"this token ({gpu['token'].get('prefix')})", gpu["token"], out)


def _gpu_seconds_line(who: str, part: dict[str, Any], out: TextIO | None) -> None:
    limit = part.get("limit_per_day")
    cap = f" of {limit:g} s a day ({part.get('left_today'):g} s left)" if limit else " (no daily limit)"
    print(f"  {who}: {part.get('used_today', 0):g} s charged today{cap}; {part.get('total', 0):g} s in all",
          file=out)
