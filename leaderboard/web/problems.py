"""The problem page: what to implement, t_SOL per shape and GPU type, and the rankings.

``/problems/<name>/?gpu=<key>&features=1&version=<n>``: the GPU type tabs, the required-features
filter and the version links are plain links and a GET form, so the page works without JavaScript and
every view has a URL. The rankings are the current catalogue version's unless ``version`` names an
older one (each version ranks apart: a new baseline changes what S means).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from leaderboard.models import GpuType, Problem, RankingEntry
from leaderboard.ranking_maintenance import ranked_versions, requires_features
from leaderboard.reference_lines import line_rows
from leaderboard.web.boards import board_shapes, problem_board, provisional_rows, shape_boards
from leaderboard.web.cache import cached_fragment
from leaderboard.web.highlight import highlighted
from leaderboard.web.history import score_history
from leaderboard.web.reference_section import reference_section
from leaderboard.web.sol import reference_source, shape_sol, sol_derivation

#: Users whose own trend is drawn beside the record line.
TREND_USERS = 5


def selected_gpu(problem: Problem, gpu_types: list[GpuType], requested: str | None,
                 version: int | None = None) -> GpuType:
    """The tab asked for; else the first GPU type this problem has rankings on (at this version);
    else the first."""
    if requested:
        for gpu in gpu_types:
            if gpu.key == requested:
                return gpu
        raise Http404(f"no GPU type {requested!r}")
    ranked = set(RankingEntry.objects.filter(problem=problem, problem_version=version or problem.version)
                 .values_list("gpu_type_id", flat=True).distinct())
    return next((gpu for gpu in gpu_types if gpu.pk in ranked), gpu_types[0])


def selected_version(problem: Problem, requested: str | None) -> int:
    """The catalogue version whose rankings to show: the current one, or an earlier one asked for."""
    if requested is None or requested == "":
        return problem.version
    if not (requested.isascii() and requested.isdigit() and len(requested) <= 9) or not (
            1 <= int(requested) <= problem.version):
        raise Http404(f"{problem.name} has versions 1 to {problem.version}, not {requested!r}")
    return int(requested)


def shape_table(problem: Problem, gpu_types: list[GpuType]) -> list[dict[str, Any]]:
    """Every active shape with its t_SOL and bound on each GPU type that has a speed of light."""
    gpus = [gpu for gpu in gpu_types if not gpu.development_device]
    return [{"shape": shape, "sols": [shape_sol(problem, shape, gpu) for gpu in gpus]}
            for shape in problem.shapes.all() if shape.active]


@lru_cache(maxsize=64)
def reference_html(name: str, catalogue_sha256: str) -> SafeString:
    """Highlighted once per catalogue version (the key changes when the problem does)."""
    problem = Problem(name=name)
    return highlighted(reference_source(problem), "python")


@require_GET
def problem_page(request: HttpRequest, name: str) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.prefetch_related("shapes"), name=name, active=True)
    gpu_types = list(GpuType.objects.order_by("development_device", "key"))
    if not gpu_types:
        raise Http404("no GPU types yet (manage.py sync_gpu_types)")
    version = selected_version(problem, request.GET.get("version"))
    gpu = selected_gpu(problem, gpu_types, request.GET.get("gpu"), version)
    require = requires_features(problem, gpu)
    features_only = require and request.GET.get("features") == "1"
    key = f"web:rankings:{problem.pk}:{problem.catalogue_sha256}:{gpu.pk}:{int(features_only)}:v{version}"
    return render(
        request,
        "web/problem.html",
        {
            "problem": problem,
            "gpu_types": gpu_types,
            "gpu": gpu,
            "requires_features": require,
            "version": version,
            "versions": ranked_versions(problem),
            "version_query": "" if version == problem.version else f"&version={version}",
            "required_features": problem.required_features.get(gpu.arch or "", []),
            "features_only": features_only,
            "shapes": shape_table(problem, gpu_types),
            "sol_gpus": [g for g in gpu_types if not g.development_device],
            "reference": reference_html(problem.name, problem.catalogue_sha256),
            "sol_derivation": sol_derivation(problem.name),
            "rankings": cached_fragment(
                key,
                "web/_rankings.html",
                lambda: rankings_context(problem, gpu, features_only, version),
                problem_name=problem.name,
            ),
        },
    )


def rankings_context(problem: Problem, gpu: GpuType, features_only: bool,
                     version: int | None = None) -> dict[str, Any]:
    """Everything the rankings part of the page shows (the same for every visitor), for one
    catalogue version (default: the current one)."""
    lines = line_rows(problem, gpu, version, [shape.pk for shape in board_shapes(problem, gpu, version)])
    board = problem_board(problem, gpu, require_features=features_only, version=version, lines=lines)
    leaders = [row.user for row in board.rows if row.kind == "ranked"][:TREND_USERS]
    chart, records = score_history(problem, gpu, leaders, timezone.now(), version)
    return {
        "problem": problem,
        "gpu": gpu,
        "board": board,
        "chart": chart,
        "records": records,
        "version": version or problem.version,
        "shape_boards": shape_boards(
            problem, gpu, require_features=features_only, version=version, lines=lines
        ),
        "provisional": provisional_rows(problem, gpu, version=version),
        "reference_lines": reference_section(problem, gpu, lines, version),
    }
