"""Home, user and integrity-log pages: each a fixed handful of queries (tests count them)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, IntegerField, Max, OuterRef, Prefetch, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from leaderboard import gpu_time
from leaderboard.api import quotas
from leaderboard.audience import public_message
from leaderboard.dispatch.enqueue import pending_counts
from leaderboard.models import (
    Evaluation,
    EvaluationStatus,
    GpuType,
    Problem,
    RankingEntry,
    RankingTrack,
    Submission,
)
from leaderboard.web.cache import cached_fragment

RECORDS_ON_HOME = 8
SUBMISSIONS_ON_USER_PAGE = 50
INTEGRITY_ROWS = 100


def best_per_problem_and_gpu() -> dict[tuple[int, int], RankingEntry]:
    """The current leader of every (problem, GPU type) whole-problem ranking of the problem's current
    catalogue version: two queries."""
    current = RankingEntry.objects.filter(problem_version=F("problem__version"))
    best = (current.filter(shape__isnull=True, track=RankingTrack.ALL)
            .values_list("problem_id", "gpu_type_id").annotate(top=Max("score")))
    condition = Q(pk__in=[])
    for problem_id, gpu_type_id, top in best:
        condition |= Q(problem_id=problem_id, gpu_type_id=gpu_type_id, score=top)
    leaders: dict[tuple[int, int], RankingEntry] = {}
    entries = (current.filter(condition, shape__isnull=True, track=RankingTrack.ALL)
               .select_related("user", "problem", "gpu_type").order_by("submitted_at", "id"))
    for entry in entries:
        leaders.setdefault((entry.problem_id, entry.gpu_type_id), entry)  # ties: the earlier one leads
    return leaders


def home_tables() -> dict[str, Any]:
    """The home page's tables (the same for every visitor)."""
    problems = list(Problem.objects.filter(active=True).order_by("name"))
    gpu_types = list(GpuType.objects.order_by("development_device", "key"))
    leaders = best_per_problem_and_gpu()
    rows = [{"problem": problem, "leaders": [leaders.get((problem.pk, gpu.pk)) for gpu in gpu_types]}
            for problem in problems]
    depth = pending_counts()
    queues = [
        {"gpu": gpu, **depth.get(gpu.key, {"waiting": 0, "in_broker": 0, "running": 0})} for gpu in gpu_types
    ]
    records = sorted(leaders.values(), key=lambda entry: entry.submitted_at, reverse=True)[:RECORDS_ON_HOME]
    return {"rows": rows, "gpu_types": gpu_types, "records": records, "queues": queues}


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "web/home.html",
        {"tables": cached_fragment("web:home", "web/_home_tables.html", home_tables)},
    )


def best_ranks(user: Any) -> list[RankingEntry]:
    """The user's whole-problem rows, each with ``rank`` (1 + rows with a better score or an equal
    score submitted earlier, in the same catalogue version's ranking), in one query; rows of older
    versions of a problem too (the page marks them)."""
    ahead = (
        RankingEntry.objects.filter(
            problem=OuterRef("problem"),
            problem_version=OuterRef("problem_version"),
            gpu_type=OuterRef("gpu_type"),
            shape__isnull=True,
            track=RankingTrack.ALL,
        )
        .filter(
            Q(score__gt=OuterRef("score"))
            | Q(score=OuterRef("score"), submitted_at__lt=OuterRef("submitted_at"))
        )
        .order_by()
        .values("problem")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return list(RankingEntry.objects.filter(user=user, shape__isnull=True, track=RankingTrack.ALL)
                .annotate(rank=Coalesce(Subquery(ahead, output_field=IntegerField()), 0) + 1)
                .select_related("problem", "gpu_type").order_by("rank", "problem__name", "-problem_version"))


@require_GET
def user_page(request: HttpRequest, username: str) -> HttpResponse:
    person = get_object_or_404(get_user_model(), username=username, is_active=True)
    evaluations = Prefetch("evaluations", queryset=Evaluation.objects.select_related("gpu_type")
                           .only("id", "submission_id", "gpu_type", "mode", "status", "score", "run_number",
                                 "rank_eligible", "flags").order_by("gpu_type__key", "-run_number"))
    submissions = (
        Submission.objects.filter(user=person)
        .select_related("problem")
        .prefetch_related(evaluations)
        .defer("source", "static_evidence", "launch_spec")
        .order_by("-created_at")[:SUBMISSIONS_ON_USER_PAGE]
    )
    total = Submission.objects.filter(user=person).count()
    gpu_seconds = gpu_time.totals(gpu_time.of_user(person), quotas.day_bounds()[0])
    return render(request, "web/user.html", {"person": person, "submissions": submissions, "total": total,
                                             "ranks": best_ranks(person), "gpu_seconds": gpu_seconds})


def integrity_entries() -> list[Evaluation]:
    """Rejected results, results held back for review (flags) and results an operator withdrew,
    newest decision first (a withdrawal counts from when it was made)."""
    return list(
        Evaluation.objects.filter(
            Q(status=EvaluationStatus.REJECTED)
            | (Q(status=EvaluationStatus.PASSED) & ~Q(flags=[]))
            | Q(withdrawal__isnull=False)
        )
        .select_related("submission__user", "submission__problem", "gpu_type", "withdrawal")
        .defer("report", "log", "submission__source", "submission__static_evidence")
        .annotate(decided_at=Coalesce("withdrawal__withdrawn_at", "finished_at"))
        .order_by("-decided_at", "-id")[:INTEGRITY_ROWS]
    )


@require_GET
def integrity_log(request: HttpRequest) -> HttpResponse:
    entries = integrity_entries()
    for entry in entries:  # a public page: a private submission's rejection in fixed words (audience.py)
        entry.reason = entry.message if entry.submission.public else public_message(
            entry.status, entry.evaluator_status, entry.message, None)
    return render(request, "web/integrity.html", {"entries": entries})
