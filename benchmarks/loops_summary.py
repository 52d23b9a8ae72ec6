"""A compact markdown summary of the issue-36 figures in a folder (``agent_loops_*.json``,
``spare_disturbance_*.json``), for the device call's output.

    python benchmarks/loops_summary.py OUT_FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def line(values: dict[str, Any] | None, key: str = "p50") -> str:
    if not values:
        return "-"
    return f"{values[key]:.2f} (p90 {values['p90']:.2f}, max {values['max']:.2f}, n {values['n']})"


def back_to_back(case: dict[str, Any]) -> list[str]:
    summary = case["summary"]
    out = ["### Back to back", "", ("| # | receipt -> hand-over | -> provisional | -> witnessed | ratio | "
           "its spare's warm-up | warmed by the job |"), "|---|---|---|---|---|---|---|"]
    for row in summary["per_submission"]:
        out.append(
            f"| {row['index']} | {row['receipt_to_hand_over_s']} | {row['receipt_to_provisional_s']} | "
            f"{row['receipt_to_final_s']} | {row['final_over_provisional']} | {row.get('spare_warm_s')} | "
            f"{row['spare_warmed_by_job']} |"
        )
    out += ["", f"targets: `{json.dumps(summary['targets'])}`", ""]
    return out


def loop(case: dict[str, Any]) -> list[str]:
    summary = case["summary"]
    latency = summary["latency"]
    out = ["### Loop", "", (f"{summary['n']} submissions, statuses {summary['statuses']}, witnessed "
           f"{summary['witnessed']}, wall {summary['wall_s']} s; GPU `{json.dumps(summary['gpu'])}`"), ""]
    for key in (
        "receipt_to_provisional_s",
        "receipt_to_final_s",
        "submit_to_provisional_s",
        "submit_to_stored_s",
    ):
        out.append(f"- {key}: {line(latency.get(key))}")
    for problem, table in summary["latency_by_problem"].items():
        out.append(f"- {problem} receipt -> provisional {line(table.get('receipt_to_provisional_s'))}; "
                   f"-> witnessed {line(table.get('receipt_to_final_s'))}")
    out += ["", "| where the time goes | seconds | share |", "|---|---|---|"]
    for name, part in summary["where_time_goes"]["parts"].items():
        out.append(f"| {name} | {part['seconds']} | {part['share']} |")
    out += ["", f"spares: `{json.dumps(summary['spare'])}`", ""]
    return out


def fair(case: dict[str, Any]) -> list[str]:
    summary = case["summary"]
    out = [
        "### Two tokens at once",
        "",
        (
            f"start order: {' '.join(name[-1] for name in summary['start_order'])}; "
            f"longest turn of one user: {summary['longest_turn_of_one_user']}; spares: {summary['spares']}; "
            f"statuses {summary['statuses']}"
        ),
    ]
    for user, figures in summary["per_user"].items():
        out.append(f"- {user}: {figures['jobs']} jobs, {figures['gpu_seconds']} GPU-s, submit -> stored "
                   f"{line(figures['latency'].get('submit_to_stored_s'))}")
    return [*out, ""]


def disturbance(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    out = [
        f"### Disturbance: {data['problem']} ({data['shapes']})",
        "",
        (
            f"all witnessed: {data.get('all_witnessed')}; "
            f"staged spares found on the GPU: {data.get('staged_spares_on_gpu')}; "
            f"NVML processes in the witnessed calls: "
            f"{[run['witness_gpu_processes'] for run in data['runs']]}; "
            f"spares staged beside: "
            f"{[run['spares_staged_beside'] for run in data['runs'] if run['condition'] == 'beside']}"
        ),
        "",
        "| shape | alone median us (spread, agreement) | beside | beside / alone - 1 |",
        "|---|---|---|---|",
    ]
    for shape, row in (data.get("comparison") or {}).items():
        cells = [
            f"{row[c]['median_us']} ({row[c]['spread']}, {row[c].get('witness_agreement')})"
            if c in row
            else "-"
            for c in ("alone", "beside")
        ]
        out.append(f"| {shape} | {cells[0]} | {cells[1]} | {row.get('beside_over_alone', '-')} |")
    return [*out, ""]


def main() -> None:
    folder = Path(sys.argv[1])
    out = [f"## Issue 36 figures in {folder}", ""]
    renderers = {"b2b": back_to_back, "loop": loop, "fair": fair}
    for path in sorted(folder.glob("agent_loops_*.json")):
        data = json.loads(path.read_text())
        out += [(f"**{path.name}** ({data['device']}, broker {data['broker']}, commit "
                f"{data['provenance'].get('commit_env')})"), ""]
        for name, case in data["cases"].items():
            out += renderers[name](case)
    for path in sorted(folder.glob("spare_disturbance_*.json")):
        out += disturbance(path)
    print("\n".join(out))


if __name__ == "__main__":
    main()
