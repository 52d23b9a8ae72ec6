"""Agent loops at full speed (issue 36), through the production path: a broker, a site worker and a
runner node with warm spares; writes JSON with provenance.

    PYTHONPATH=. python benchmarks/agent_loops.py --device 0 --gpu-type h200 --out "$OUT" --cases b2b,fair
    PYTHONPATH=. python benchmarks/agent_loops.py --device cpu --out DIR          (CPU dry run, all cases)

Cases (one token per user; every submission is the problem's example, ranked; submitted in a
burst, as a loop that keeps its queue full does: the site hands each user K at a time to the broker,
so the runner takes the next job the moment the previous one ends):

- ``b2b``: 10 (``--b2b``) one-shape vector_add submissions back to back: each one's receipt ->
  provisional and -> witnessed (final report), against the target (the last one provisional within
  3 s of its receipt, witnessed within 2x that).
- ``loop``: 50 (``--loop``) submissions from one token, a mix (per 5: three vector_add on one shape,
  one softmax and one gemm_bf16 on their ranked shapes): total wall time, latency percentiles, the
  GPU's busy fraction, where the time goes.
- ``fair``: two users with a token each, ``--fair`` vector_add submissions each, at the same time:
  the order their jobs start, each user's latencies and GPU-seconds, one spare per job.

The timing disturbance of a spare staging beside a running job: ``spare_disturbance.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fast_feedback import broker_kind, gpu_facts
from loop_figures import back_to_back_summary, fairness_summary, loop_summary, sample
from runner_cluster import REPO, Cluster, provenance

EXAMPLES = REPO / "examples" / "python"
#: (problem, shape selection) of the loop's mix, repeated: 3 x vector_add on one shape, 1 x softmax
#: and 1 x gemm_bf16 on their ranked shapes.
LOOP_MIX = (("vector_add", "quick"), ("softmax", "ranked"), ("vector_add", "quick"), ("gemm_bf16", "ranked"),
            ("vector_add", "quick"))
#: The site's quotas must not stop a benchmark's burst (the site's defaults: 32 queued).
SITE_ENV = {"SOLBOARD_QUOTA_MAX_QUEUED": "500", "SOLBOARD_QUOTA_DAILY_PER_PROBLEM": "5000"}


def account(name: str) -> tuple[Any, Any]:
    """A user and an API token of theirs (the submissions' origin, as the API records it)."""
    from django.contrib.auth import get_user_model

    from leaderboard.models import ApiToken

    user = get_user_model().objects.get_or_create(username=name)[0]
    return user, ApiToken.issue(user, name=f"{name}'s loop")[0]


def submit(user: Any, token: Any, problem: str, shapes: str, gpu_type: str) -> tuple[int, float]:
    """A ranked submission of the example with its origin token; the shape selection is set before
    the hand-over, which happens on commit. (evaluation id, submit time)."""
    from django.db import transaction

    from leaderboard.models import Evaluation, SubmissionOrigin
    from leaderboard.submissions import create_submission

    source = (EXAMPLES / f"{problem}.py").read_text()
    submitted = time.time()
    with transaction.atomic():
        submission = create_submission(user, problem, "python", source, [gpu_type], "ranked")
        SubmissionOrigin.objects.create(submission=submission, token=token)
        Evaluation.objects.filter(submission=submission).update(shape_selection=shapes)
    return int(submission.evaluations.get().pk), submitted


def rows(submitted: dict[int, float]) -> list[dict[str, Any]]:
    from leaderboard.models import Evaluation

    def epoch(moment: Any) -> float | None:
        return None if moment is None else moment.timestamp()

    found = Evaluation.objects.filter(pk__in=submitted).select_related(
        "submission__user", "submission__problem"
    )
    return [{"evaluation_id": e.pk, "owner": e.submission.user.username, "problem": e.submission.problem.name,
             "status": e.status, "submitted": submitted[e.pk], "started": epoch(e.started_at),
             "provisional": epoch(e.provisional_at), "finished": epoch(e.finished_at),
             "gpu_seconds": e.gpu_seconds, "report": e.report, "message": e.message} for e in found]


def burst(cluster: Cluster, plan: list[tuple[Any, Any, str, str]], gpu_type: str,
          timeout_s: float) -> tuple[list[dict[str, Any]], float]:
    """Submit every (user, token, problem, shapes) of ``plan`` at once; wait for all; (rows, wall s)."""
    began = time.time()
    submitted = dict(submit(user, token, problem, shapes, gpu_type) for user, token, problem, shapes in plan)
    cluster.wait_all(list(submitted), timeout=timeout_s)
    found = rows(submitted)
    last = max((row["finished"] or time.time() for row in found), default=began)
    return found, last - began


def run_b2b(cluster: Cluster, count: int, gpu_type: str, timeout_s: float) -> dict[str, Any]:
    user, token = account("b2b")
    found, wall = burst(cluster, [(user, token, "vector_add", "quick")] * count, gpu_type, timeout_s)
    samples = [sample(row) for row in found]
    return {"wall_s": round(wall, 3), "summary": back_to_back_summary(samples), "samples": samples}


def run_loop(cluster: Cluster, count: int, gpu_type: str, timeout_s: float) -> dict[str, Any]:
    from leaderboard import gpu_time

    user, token = account("loop")
    plan = [(user, token, *LOOP_MIX[index % len(LOOP_MIX)]) for index in range(count)]
    found, wall = burst(cluster, plan, gpu_type, timeout_s)
    samples = [sample(row) for row in found]
    totals = gpu_time.totals(gpu_time.of_token(token), _day_start())
    return {"wall_s": round(wall, 3), "mix": [list(item) for item in LOOP_MIX], "token_gpu_seconds": totals,
            "summary": loop_summary(samples, wall), "samples": samples}


def run_fair(cluster: Cluster, each: int, gpu_type: str, timeout_s: float) -> dict[str, Any]:
    """Two users' loops at the same time: their submissions interleaved as two agents fire them."""
    first, second = account("agent-a"), account("agent-b")
    plan = [(*owner, "vector_add", "quick") for _ in range(each) for owner in (first, second)]
    found, wall = burst(cluster, plan, gpu_type, timeout_s)
    samples = [sample(row) for row in found]
    starts = {row["evaluation_id"]: row["started"] or float("inf") for row in found}
    return {"wall_s": round(wall, 3), "summary": fairness_summary(samples, starts), "samples": samples}


def _day_start() -> Any:
    from leaderboard.api.quotas import day_bounds

    return day_bounds()[0]


CASES = {"b2b": run_b2b, "loop": run_loop, "fair": run_fair}


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu", help="the runner's --device: cpu, or a GPU index")
    parser.add_argument("--gpu-type", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", default="b2b,loop,fair")
    parser.add_argument("--b2b", type=int, default=10)
    parser.add_argument("--loop", type=int, default=50)
    parser.add_argument("--fair", type=int, default=8, help="submissions per user")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--broker", default="", help="a broker URL; default: the embedded SQLite broker")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "benchmark": "issue 36: agent loops through broker, site worker and runner node",
        "device": "CPU development device (figures for the trend only)"
        if args.device == "cpu"
        else f"GPU {args.gpu_type}",
        "provenance": {
            **provenance(),
            **gpu_facts(),
            "commit_env": os.environ.get("SOLBOARD_COMMIT", "unknown"),
        },
        "broker": broker_kind(args.broker),
        "spare_depth": os.environ.get("SOLBOARD_RUNNER_SPARE_DEPTH", "default"),
        "cases": {},
    }
    device = "cpu" if args.device == "cpu" else args.gpu_type
    path = args.out / f"agent_loops_{device}{'_' + args.tag if args.tag else ''}.json"
    env = {**SITE_ENV, **({"CELERY_BROKER_URL": args.broker} if args.broker else {})}
    cluster = Cluster(runners=1, device=args.device, keep=True, loglevel="INFO", env=env)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a time limit still leaves the JSON and the logs
    sizes = {"b2b": args.b2b, "loop": args.loop, "fair": args.fair}
    try:
        with cluster:
            began = time.time()
            cluster.wait_for_runners(timeout=900)
            result["runner_up_s"] = round(time.time() - began, 1)
            user, token = account("warm-up")  # one job first: the site worker and the runner settle
            burst(cluster, [(user, token, "vector_add", "quick")], args.gpu_type, args.timeout)
            for name in args.cases.split(","):
                result["cases"][name] = CASES[name](cluster, sizes[name], args.gpu_type, args.timeout)
                print(name, json.dumps(result["cases"][name]["summary"], default=str)[:3000], flush=True)
                path.write_text(json.dumps(result, indent=1, default=str))
    finally:
        path.write_text(json.dumps(result, indent=1, default=str))
        for log in cluster.folder.glob("*.log"):
            shutil.copy(log, args.out / f"{args.tag or 'loops'}_{log.name}")
        shutil.rmtree(cluster.folder, ignore_errors=True)


if __name__ == "__main__":
    main()
