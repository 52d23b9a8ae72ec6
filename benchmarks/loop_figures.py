"""Figures of agent-loop benchmarks (issue 36), from the site's rows and the runners' reports:
pure functions over one sample per evaluation, no Django import (``agent_loops.py`` reads the rows).

Per sample: submit -> provisional / stored on the site's clock; the runner's receipt -> hand-over ->
provisional -> final report on the runner's clock (``phase_seconds``'s ``runner.*``); the job's
GPU-seconds (the site's bounded figure); the time the GPU spent in the timed calls of the
submission's and the baseline's kernels (the report's timings: median x calls, and the witness's
calls): a lower bound of the GPU's busy time, as the correctness calls and warm-ups are not counted.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

#: Where a job's time goes, by the judge's phases (docs/harness.md) and the runner's clock.
PHASE_GROUPS = {
    "start-up (hand-over to the judge, imports left, device facts)": ("judge_start", "start_up"),
    "baseline timing": ("baseline",),
    "compile (import of the submission)": ("compile",),
    "correctness": ("test",),
    "timing (ranked stage)": ("ranked", "witness.load_wait"),
    "witness (ncu)": ("witness",),
}
WITNESS_PROCESSES = re.compile(r"at most (\d+) processes held a CUDA context")


def kernel_seconds(report: dict[str, Any]) -> float:
    """Seconds the GPU ran the submission's and the baseline's kernels in the timed and witnessed
    calls (median x calls; a lower bound of its busy time)."""
    total = 0.0
    for shape in report.get("shapes") or []:
        for key in ("timing", "baseline_timing", "witness"):
            stats = shape.get(key) or {}
            if isinstance(stats.get("median_us"), (int, float)) and isinstance(stats.get("n"), int):
                total += stats["median_us"] * stats["n"] * 1e-6
    return total


def runner_clock(phases: dict[str, float]) -> dict[str, float]:
    """receipt -> hand-over, -> provisional, -> final report, -> exit (the runner's clock)."""
    handed = phases.get("runner.receipt_to_hand_over")
    if handed is None:
        return {}
    out = {"receipt_to_hand_over_s": handed}
    for event in ("provisional", "report", "exit"):
        after = phases.get(f"runner.hand_over_to_{event}")
        if after is not None:
            out[f"receipt_to_{'final' if event == 'report' else event}_s"] = round(handed + after, 3)
    return out


def sample(row: dict[str, Any]) -> dict[str, Any]:
    """One evaluation's figures. ``row``: status, submitted (epoch s), started/provisional/finished
    (epoch s or None), gpu_seconds, report, owner, problem, message."""
    report = row.get("report") or {}
    phases = report.get("phase_seconds") or {}
    out: dict[str, Any] = {
        key: row.get(key) for key in ("evaluation_id", "owner", "problem", "status", "gpu_seconds")
    }
    out.update(witnessed=bool(report.get("witnessed")), shapes=len(report.get("shapes") or []),
               warm_spare_id=(report.get("sandbox") or {}).get("warm_spare_id"),
               kernel_seconds=round(kernel_seconds(report), 4), phase_seconds=phases)
    if row["status"] != "passed":
        out["message"] = str(row.get("message") or "")[-800:]
    for name, moment in (("provisional", row.get("provisional")), ("stored", row.get("finished"))):
        out[f"submit_to_{name}_s"] = None if moment is None else round(moment - row["submitted"], 3)
    out.update(runner_clock(phases))
    if row.get("started") is not None and "receipt_to_hand_over_s" in out:
        # job_started leaves the runner just before the hand-over; the site worker handles it
        # after whatever it was storing: an upper bound of the receipt on the site's clock.
        out["submit_to_receipt_s"] = round(
            row["started"] - out["receipt_to_hand_over_s"] - row["submitted"], 3
        )
    if None not in (row.get("provisional"), row.get("finished")) and "receipt_to_exit_s" in out \
            and "receipt_to_provisional_s" in out:
        # Both stored by the site worker as they came: its provisional -> stored, less the
        # runner's provisional -> exit, is the delivery and storage after the judge's exit.
        site = row["finished"] - row["provisional"]
        out["exit_to_stored_s"] = round(
            max(site - (out["receipt_to_exit_s"] - out["receipt_to_provisional_s"]), 0.0), 3
        )
        out["receipt_to_stored_s"] = round(out["receipt_to_exit_s"] + out["exit_to_stored_s"], 3)
    notes = " ".join(report.get("notes") or [])
    found = WITNESS_PROCESSES.search(notes)
    out["witness_gpu_processes"] = int(found.group(1)) if found else None
    if "receipt_to_final_s" in out and out.get("receipt_to_provisional_s"):
        out["final_over_provisional"] = round(out["receipt_to_final_s"] / out["receipt_to_provisional_s"], 3)
    return out


def percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))], 3)

    return {"n": len(ordered), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1],
            "min": ordered[0]}


LATENCIES = (
    "submit_to_receipt_s",
    "receipt_to_hand_over_s",
    "receipt_to_provisional_s",
    "receipt_to_final_s",
    "exit_to_stored_s",
    "receipt_to_stored_s",
    "submit_to_provisional_s",
    "submit_to_stored_s",
    "final_over_provisional",
)


def latency_table(samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        key: percentiles([s[key] for s in samples if isinstance(s.get(key), (int, float))])
        for key in LATENCIES
    }


BETWEEN_JOBS = "spares' device warm-up before their job's receipt (GPU locks held, on no job's clock)"


def where_time_goes(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per part over every job (receipt -> stored), and each part's share of them; plus the
    device warm-ups of spares that the job before warmed (between the two jobs, on nobody's clock)."""
    parts: dict[str, float] = {"waiting for the spare (receipt -> hand-over)": 0.0, BETWEEN_JOBS: 0.0}
    for name in PHASE_GROUPS:
        parts[name] = 0.0
    parts.update({"final report -> judge's exit and clean-up": 0.0, "exit -> stored (delivery, site)": 0.0,
                  "other (judge's bookkeeping, stream)": 0.0})
    total = 0.0
    for s in samples:
        phases, span = s["phase_seconds"], s.get("receipt_to_stored_s")
        if not isinstance(span, (int, float)) or "receipt_to_hand_over_s" not in s:
            continue
        total += span
        known = s["receipt_to_hand_over_s"]
        parts["waiting for the spare (receipt -> hand-over)"] += s["receipt_to_hand_over_s"]
        for name, keys in PHASE_GROUPS.items():
            seconds = sum(float(phases.get(key, 0.0)) for key in keys)
            parts[name] += seconds
            known += seconds
        if "receipt_to_final_s" in s:
            parts["final report -> judge's exit and clean-up"] += (
                s["receipt_to_exit_s"] - s["receipt_to_final_s"]
            )
            parts["exit -> stored (delivery, site)"] += s["exit_to_stored_s"]
            known += span - s["receipt_to_final_s"]
        parts["other (judge's bookkeeping, stream)"] += max(span - known, 0.0)
        if not phases.get("runner.spare_warmed_by_job") and "runner.spare_warm" in phases:
            parts[BETWEEN_JOBS] += phases["runner.spare_warm"]
            total += phases["runner.spare_warm"]
    return {"jobs_seconds": round(total, 3),
            "parts": {name: {"seconds": round(value, 3), "share": round(value / total, 4) if total else None}
                      for name, value in sorted(parts.items(), key=lambda item: -item[1])}}


def loop_summary(samples: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """A loop's whole cost: wall time, latencies (all and per problem), GPU busy fraction, parts."""
    kernel = sum(s["kernel_seconds"] for s in samples)
    held = sum(s["gpu_seconds"] or 0.0 for s in samples)
    by_problem = {problem: latency_table([s for s in samples if s["problem"] == problem])
                  for problem in sorted({s["problem"] for s in samples})}
    return {
        "n": len(samples), "statuses": sorted({s["status"] for s in samples}),
        "witnessed": sum(s["witnessed"] for s in samples), "wall_s": round(wall_s, 3),
        "latency": latency_table(samples), "latency_by_problem": by_problem,
        "gpu": {"kernel_seconds": round(kernel, 3), "gpu_seconds_charged": round(held, 3),
                "busy_over_gpu_seconds": round(kernel / held, 4) if held else None,
                "busy_over_wall": round(kernel / wall_s, 4) if wall_s else None,
                "gpu_seconds_over_wall": round(held / wall_s, 4) if wall_s else None},
        "where_time_goes": where_time_goes(samples),
        "spare": spare_figures(samples),
    }


def spare_figures(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The spares' two parts (staged, warmed) and whether the job had to warm its own."""
    names = sorted({name for s in samples for name in s["phase_seconds"]
                    if name.startswith(("runner.spare", "spare."))})
    medians = {name: round(statistics.median([s["phase_seconds"][name] for s in samples
                                              if name in s["phase_seconds"]]), 3) for name in names}
    ids = [s["warm_spare_id"] for s in samples if s["warm_spare_id"]]
    return {"jobs_in_a_spare": len(ids), "distinct_spares": len(set(ids)), "median_seconds": medians}


def back_to_back_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 36's target: the last of N back-to-back submissions, provisional within 3 s of its
    receipt and witnessed within 2x that."""
    ordered = sorted(samples, key=lambda s: s["evaluation_id"])
    rows = [
        {
            "index": index + 1,
            **{
                key: s.get(key)
                for key in (
                    "receipt_to_hand_over_s",
                    "receipt_to_provisional_s",
                    "receipt_to_final_s",
                    "receipt_to_stored_s",
                    "final_over_provisional",
                    "submit_to_provisional_s",
                    "submit_to_stored_s",
                    "witnessed",
                    "witness_gpu_processes",
                )
            },
            "spare_warm_s": s["phase_seconds"].get("runner.spare_warm"),
            "spare_warmed_by_job": s["phase_seconds"].get("runner.spare_warmed_by_job"),
        }
        for index, s in enumerate(ordered)
    ]
    last = rows[-1] if rows else {}
    provisional, final = last.get("receipt_to_provisional_s"), last.get("receipt_to_final_s")
    return {
        "per_submission": rows,
        "last": last,
        "targets": {
            "last_receipt_to_provisional_s": {
                "target": 3.0,
                "measured": provisional,
                "met": None if provisional is None else provisional <= 3.0,
            },
            "last_final_over_provisional": {
                "target": 2.0,
                "measured": last.get("final_over_provisional"),
                "met": None if final is None or not provisional else final <= 2 * provisional,
            },
        },
    }


def longest_run(owners: list[str]) -> int:
    longest = current = 0
    for index, owner in enumerate(owners):
        current = current + 1 if index and owner == owners[index - 1] else 1
        longest = max(longest, current)
    return longest


def fairness_summary(samples: list[dict[str, Any]], starts: dict[int, float]) -> dict[str, Any]:
    """Two users at once: the order their jobs started, the longest turn of one user, each one's
    latencies and GPU-seconds, and the spares (one per job)."""
    ordered = sorted(samples, key=lambda s: starts.get(s["evaluation_id"], float("inf")))
    owners = [s["owner"] for s in ordered]
    ids = [s["warm_spare_id"] for s in samples if s["warm_spare_id"]]
    users = sorted(set(owners))
    return {
        "start_order": owners,
        "longest_turn_of_one_user": longest_run(owners),
        "per_user": {
            user: {
                "jobs": owners.count(user),
                "gpu_seconds": round(sum(s["gpu_seconds"] or 0.0 for s in samples if s["owner"] == user), 3),
                "latency": latency_table([s for s in samples if s["owner"] == user]),
            }
            for user in users
        },
        "spares": {
            "jobs_in_a_spare": len(ids),
            "distinct": len(set(ids)),
            "shared_between_jobs": len(ids) - len(set(ids)),
        },
        "statuses": sorted({s["status"] for s in samples}),
    }
