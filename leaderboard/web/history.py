"""Score history of one (problem, GPU type): the records and the leaders' own trends.

The records come from the database in one query (a window over the rank-eligible results in
submission order keeps those that beat every earlier one), so the page never loads a problem's
whole history; the trends only for the few users named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from django.db.models import F, Max, Q, QuerySet, Window
from django.db.models.expressions import RowRange

from leaderboard.models import Evaluation, EvaluationStatus, GpuType, Mode, Problem
from leaderboard.web.charts import Chart, ScorePoint, history_chart

ORDER = (F("submission__created_at").asc(), F("id").asc())


def ranked_results(problem: Problem, gpu: GpuType, version: int | None = None) -> QuerySet[Evaluation]:
    """Rank-eligible results of one catalogue version (default: the current one)."""
    return Evaluation.objects.filter(
        submission__problem=problem,
        submission__problem_version=version or problem.version,
        gpu_type=gpu,
        mode=Mode.RANKED,
        status=EvaluationStatus.PASSED,
        rank_eligible=True,
        score__isnull=False,
    )


def records(problem: Problem, gpu: GpuType, version: int | None = None) -> list[ScorePoint]:
    """Each result that beat every earlier one (by submission time), oldest first."""
    earlier_best = Window(Max("score"), order_by=ORDER, frame=RowRange(start=None, end=-1))
    rows = (ranked_results(problem, gpu, version).annotate(earlier_best=earlier_best)
            .filter(Q(earlier_best__isnull=True) | Q(score__gt=F("earlier_best")))
            .order_by(*ORDER).values_list("submission__created_at", "score", "submission__user__username"))
    return [ScorePoint(at, score, user) for at, score, user in rows]


def trends(problem: Problem, gpu: GpuType, usernames: Sequence[str],
           version: int | None = None) -> dict[str, list[ScorePoint]]:
    rows = (ranked_results(problem, gpu, version).filter(submission__user__username__in=list(usernames))
            .order_by(*ORDER).values_list("submission__created_at", "score", "submission__user__username"))
    by_user: dict[str, list[ScorePoint]] = defaultdict(list)
    for at, score, user in rows:
        by_user[user].append(ScorePoint(at, score, user))
    return {user: by_user[user] for user in usernames if user in by_user}


def score_history(problem: Problem, gpu: GpuType, leaders: Sequence[str], now: datetime,
                  version: int | None = None) -> tuple[Chart | None, list[ScorePoint]]:
    found = records(problem, gpu, version)
    return history_chart(found, trends(problem, gpu, leaders, version), now), found
