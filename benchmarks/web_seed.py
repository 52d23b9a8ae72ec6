"""Seed the database that DATABASE_URL names with N submissions and their results, for the website
benchmark (benchmarks/web_bench.sh). Refuses a database that already holds submissions.

Every submission gets one ranked evaluation on h100, h200 or b200 of one of the catalogue's
problems; 90% pass, of which 5% stay provisional (no witness) and the rest are rank-eligible; 10%
fail. Figures per shape come from the evaluator's own functions (``sol_figures`` on the synced
counts and peaks) with a kernel time drawn around the baseline's. Rows are written in bulk, and the
ranking rows (each user's best per problem, GPU type and shape, on the ``all`` and ``features``
tracks) are computed here in one pass, as ``refresh_rankings_for`` would leave them, instead of
100,000 calls of it.

    DATABASE_URL=postgres://... python benchmarks/web_seed.py --submissions 100000 --users 1000
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")

import django

django.setup()

# Django's models and auth need the apps loaded: these imports follow django.setup().
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from evaluator.scoring import problem_score, sol_figures  # noqa: E402
from evaluator.sol import t_sol  # noqa: E402
from leaderboard.models import (  # noqa: E402
    Evaluation,
    GpuType,
    Problem,
    RankingEntry,
    RankingTrack,
    Shape,
    ShapeResult,
    Submission,
    sha256_text,
)
from leaderboard.ranking_maintenance import meets_features  # noqa: E402
from leaderboard.web.sol import counts_of, spec_of  # noqa: E402

GPU_KEYS = ("h100", "h200", "b200")
BATCH = 2000
SOURCE = "import torch\n\n\ndef kernel(*tensors):\n    ...  # seeded for the web benchmark ({n})\n"


@dataclass
class Best:
    score: float
    median_us: float | None
    submitted_at: Any
    submission_id: int
    evaluation_id: int

    def beaten_by(self, score: float, median_us: float | None) -> bool:
        if median_us is None:
            return score > self.score
        return self.median_us is None or median_us < self.median_us


def users(count: int) -> list[Any]:
    model = get_user_model()
    password = make_password(None)  # unusable: nobody logs in as a seeded user
    model.objects.bulk_create([model(username=f"seed{i:05d}", password=password) for i in range(count)],
                              ignore_conflicts=True)
    return list(model.objects.filter(username__startswith="seed").order_by("id"))


def shape_rows(
    evaluation: Evaluation, shapes: list[Shape], gpu: GpuType, speed: float
) -> tuple[list[ShapeResult], float | None]:
    rows, ranked_scores = [], []
    spec = spec_of(gpu)
    assert spec is not None, "GPU types only: the development device has no speed of light"
    world_size = evaluation.submission.problem.world_size
    for shape in shapes:
        counts = counts_of(shape)
        t_base = t_sol(counts, spec, world_size).t_sol_s / 0.5  # a baseline at half the speed of light
        t_kernel = t_base / speed
        figures = sol_figures(counts, spec, t_kernel, t_base, world_size=world_size)
        median = t_kernel * 1e6
        rows.append(
            ShapeResult(
                evaluation=evaluation,
                shape=shape,
                status="PASSED",
                correct=True,
                median_us=median,
                mean_us=median,
                min_us=median * 0.98,
                max_us=median * 1.1,
                std_us=median * 0.01,
                n=200,
                ci95_low_us=median * 0.995,
                ci95_high_us=median * 1.005,
                timing_method="cupti",
                baseline_median_us=t_base * 1e6,
                t_sol_us=figures.t_sol_us,
                sol_fraction=figures.sol_fraction,
                score=figures.score,
                speedup=figures.speedup,
                tflops=figures.tflops,
                gbps=figures.gbps,
            )
        )
        if shape.ranked:
            ranked_scores.append(figures.score)
    return rows, problem_score(ranked_scores) if ranked_scores else None


def seed(total: int, user_count: int, rng: random.Random) -> dict[str, int]:
    people = users(user_count)
    problems = list(Problem.objects.filter(active=True).prefetch_related("shapes"))
    gpus = {gpu.key: gpu for gpu in GpuType.objects.filter(key__in=GPU_KEYS)}
    shapes = {problem.pk: [s for s in problem.shapes.all() if s.active] for problem in problems}
    bests: dict[tuple[Any, ...], Best] = {}
    start = timezone.now() - timedelta(days=90)
    counts = {"submissions": 0, "evaluations": 0, "shape_results": 0}
    for first in range(0, total, BATCH):
        size = min(BATCH, total - first)
        plan = [(rng.choice(people), rng.choice(problems), gpus[rng.choice(GPU_KEYS)]) for _ in range(size)]
        moments = sorted(start + timedelta(seconds=rng.uniform(0, 90 * 86400)) for _ in range(size))
        submissions = Submission.objects.bulk_create(
            [
                Submission(
                    user=user,
                    problem=problem,
                    problem_version=problem.version,
                    language="python",
                    source=SOURCE.format(n=first + i),
                    source_sha256=sha256_text(SOURCE.format(n=first + i)),
                    created_at=moment,
                )
                for i, ((user, problem, _), moment) in enumerate(zip(plan, moments, strict=True))
            ]
        )
        _evaluate_batch(submissions, plan, shapes, bests, rng, counts)
        counts["submissions"] += size
        print(f"  {counts['submissions']:>7} submissions", flush=True)
    counts["ranking_entries"] = _write_rankings(bests)
    with connection.cursor() as cursor:  # fresh planner statistics, as autovacuum keeps them on a live site
        cursor.execute("ANALYZE")
    return counts


def _evaluate_batch(submissions: list[Submission], plan: list[tuple[Any, Problem, GpuType]],
                    shapes: dict[int, list[Shape]], bests: dict[tuple[Any, ...], Best], rng: random.Random,
                    counts: dict[str, int]) -> None:
    scored: list[tuple[Evaluation, Problem, GpuType, list[ShapeResult]]] = []
    for submission, (_, problem, gpu) in zip(submissions, plan, strict=True):
        outcome, rows = rng.random(), []
        evaluation = Evaluation(
            submission=submission,
            gpu_type=gpu,
            mode="ranked",
            status="passed",
            evaluator_status="PASSED",
            queued_at=submission.created_at,
            started_at=submission.created_at,
            finished_at=submission.created_at + timedelta(seconds=40),
        )
        if outcome < 0.10:
            evaluation.status, evaluation.evaluator_status = "failed", "INCORRECT_NUMERICAL"
            evaluation.message = "values outside tolerance on n16777216"
        else:
            rows, evaluation.score = shape_rows(
                evaluation, shapes[problem.pk], gpu, rng.uniform(0.45, 1.95)
            )  # < 2: below light
            evaluation.rank_eligible = outcome >= 0.145 and evaluation.score is not None  # 5%: provisional
        scored.append((evaluation, problem, gpu, rows))
    Evaluation.objects.bulk_create([evaluation for evaluation, *_ in scored], batch_size=BATCH)
    ShapeResult.objects.bulk_create([row for *_, rows in scored for row in rows], batch_size=BATCH)
    for evaluation, problem, gpu, rows in scored:
        if evaluation.rank_eligible:
            _offer(bests, evaluation, problem, gpu, rows)
    counts["evaluations"] += len(scored)
    counts["shape_results"] += sum(len(rows) for *_, rows in scored)


def _offer(bests: dict[tuple[Any, ...], Best], evaluation: Evaluation, problem: Problem, gpu: GpuType,
           rows: list[ShapeResult]) -> None:
    submission = evaluation.submission
    tracks = [RankingTrack.ALL] + ([RankingTrack.FEATURES] if meets_features(problem, gpu, None) else [])
    offers = [(None, evaluation.score, None)] + [(row.shape_id, row.score, row.median_us) for row in rows
                                                  if row.shape.ranked]
    for track in tracks:
        for shape_id, score, median in offers:
            key = (problem.pk, submission.problem_version, gpu.pk, shape_id, track, submission.user_id)
            best = bests.get(key)
            if best is None or best.beaten_by(score or 0.0, median):
                bests[key] = Best(score or 0.0, median, submission.created_at, submission.pk, evaluation.pk)


def _write_rankings(bests: dict[tuple[Any, ...], Best]) -> int:
    rows = [
        RankingEntry(
            problem_id=problem_id,
            problem_version=version,
            gpu_type_id=gpu_id,
            shape_id=shape_id,
            track=track,
            user_id=user_id,
            submission_id=best.submission_id,
            evaluation_id=best.evaluation_id,
            score=best.score,
            median_us=best.median_us,
            submitted_at=best.submitted_at,
            features_met=None,
        )
        for (problem_id, version, gpu_id, shape_id, track, user_id), best in bests.items()
    ]
    RankingEntry.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    if Submission.objects.exists():
        print("refusing: this database already holds submissions (seed an empty one)", file=sys.stderr)
        return 2
    began = time.monotonic()
    # Submissions spread over 90 days: created_at is written as given, not stamped "now".
    Submission._meta.get_field("created_at").auto_now_add = False  # type: ignore[union-attr]
    counts = seed(args.submissions, args.users, random.Random(args.seed))
    print({**counts, "seconds": round(time.monotonic() - began, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
