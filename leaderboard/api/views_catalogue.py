"""Read-only catalogue: problems (with shapes, languages, PTX ABI, t_SOL per GPU type), GPU types,
and leaderboards per problem and GPU type (overall or per shape, paginated, by features track)."""

from __future__ import annotations

from functools import cache
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from evaluator.gpu_specs import GpuSpecError, get_gpu_spec
from evaluator.problems import Counts
from evaluator.sol import t_sol
from leaderboard.api import serializers as s
from leaderboard.api.errors import ApiError
from leaderboard.api.presenters import agent_of
from leaderboard.api.views_submissions import ERRORS, PAGE, PAGE_SIZE, ApiView, page_bounds
from leaderboard.models import GpuType, Problem, RankingEntry, RankingTrack, Shape
from leaderboard.reference_lines import line_rows
from leaderboard.web.boards import board_shapes
from leaderboard.web.native_abi import native_abi_body


class PublicView(ApiView):
    permission_classes = (AllowAny,)


def gpu_type_body(gpu: GpuType) -> dict[str, Any]:
    return {"key": gpu.key, "name": gpu.name, "arch": gpu.arch, "development_device": gpu.development_device,
            "estimated": gpu.estimated, "peaks_tflops": gpu.peaks, "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "link_bytes_per_s_per_direction": gpu.link_bytes_per_s_per_direction}


def problem_summary(problem: Problem) -> dict[str, Any]:
    return {
        "name": problem.name,
        "title": problem.title,
        "kind": problem.kind,
        "world_size": problem.world_size,
        "languages": problem.languages,
        "version": problem.version,
        "shape_count": sum(1 for shape in problem.shapes.all() if shape.active),
    }


@cache
def _spec(key: str) -> Any:
    try:
        return get_gpu_spec(key)
    except (GpuSpecError, KeyError, ValueError):
        return None


def sol_of(shape: Shape, gpu: GpuType, world_size: int) -> dict[str, Any] | None:
    """t_SOL of one call on this GPU type, from the catalogue's counts; None without peaks (CPU)."""
    spec = _spec(gpu.key)
    if spec is None or gpu.development_device:
        return None
    counts = Counts(flops=dict(shape.counts.get("flops", {})), bytes=float(shape.counts.get("bytes", 0.0)),
                    comm_bytes=float(shape.counts.get("comm_bytes", 0.0)))
    try:
        bound = t_sol(counts, spec, world_size)
    except GpuSpecError:
        return None
    return {"t_sol_us": bound.t_sol_us, "bound": bound.bound}


def problem_body(problem: Problem) -> dict[str, Any]:
    gpus = list(GpuType.objects.all())
    shapes = [{"shape_id": shape.shape_id, "axes": shape.axes, "ranked": shape.ranked, "quick": shape.quick,
               "cpu": shape.cpu, "counts": shape.counts,
               "t_sol": {gpu.key: sol_of(shape, gpu, problem.world_size) for gpu in gpus}}
              for shape in problem.shapes.filter(active=True)]
    return {**problem_summary(problem), "description": problem.description, "axes": problem.axes,
            "tolerance": problem.tolerance, "inputs": problem.inputs, "outputs": problem.outputs,
            "baseline": problem.baseline_name, "ptx_abi": problem.ptx_abi,
            "required_features": problem.required_features, "native_abi": native_abi_body(problem),
            "shapes": shapes}


def active_problem(name: str) -> Problem:
    problem = Problem.objects.filter(name=name, active=True).first()
    if problem is None:
        raise ApiError("not_found", f"no problem {name!r}")
    return problem


class ProblemListView(PublicView):
    @extend_schema(responses={200: s.ProblemSummarySerializer(many=True)}, summary="The problem catalogue")
    def get(self, request: Request) -> Response:
        problems = Problem.objects.filter(active=True).prefetch_related("shapes").order_by("name")
        return Response([problem_summary(problem) for problem in problems])


class ProblemDetailView(PublicView):
    @extend_schema(responses={200: s.ProblemSerializer, **ERRORS},
                   summary="A problem: shapes, languages, PTX parameter ABI, t_SOL per GPU type")
    def get(self, request: Request, name: str) -> Response:
        return Response(problem_body(active_problem(name)))


class GpuTypeListView(PublicView):
    @extend_schema(responses={200: s.GpuTypeSerializer(many=True)}, summary="GPU types and their peaks")
    def get(self, request: Request) -> Response:
        return Response([gpu_type_body(gpu) for gpu in GpuType.objects.all()])


TRACK = OpenApiParameter(
    "track",
    str,
    enum=RankingTrack.values,
    required=False,
    description="all (default) or features: only results that use the required features.",
)


VERSION = OpenApiParameter(
    "version",
    int,
    required=False,
    description="The problem's catalogue version (default: the current one). Each version "
    "ranks apart: a new version may time a faster baseline.",
)


def references_body(
    problem: Problem, gpu: GpuType, version: int, shape: Shape | None = None
) -> list[dict[str, Any]]:
    """The reference lines of a problem version on a GPU type (one shape's figures if ``shape``)."""
    shapes = [item.pk for item in board_shapes(problem, gpu, version)]
    return [line.body(shape.pk if shape else None) for line in line_rows(problem, gpu, version, shapes)]


class ReferenceLinesView(PublicView):
    @extend_schema(
        parameters=[VERSION],
        responses={200: s.ReferenceLinesSerializer, **ERRORS},
        summary="A problem's reference lines on every GPU type: measured like submissions, never ranked",
    )
    def get(self, request: Request, name: str) -> Response:
        problem = active_problem(name)
        version = LeaderboardView._version(request, problem)
        return Response(
            {
                "problem": problem.name,
                "version": version,
                "gpu_types": {
                    gpu.key: references_body(problem, gpu, version) for gpu in GpuType.objects.all()
                },
            }
        )


class LeaderboardView(PublicView):
    @extend_schema(
        parameters=[OpenApiParameter("shape", str, required=False), TRACK, VERSION, PAGE, PAGE_SIZE],
        responses={200: s.LeaderboardSerializer, **ERRORS},
        summary="Ranking of witnessed, rank-eligible results (overall by score, per shape by time)",
    )
    def get(self, request: Request, name: str, gpu: str) -> Response:
        problem = active_problem(name)
        gpu_type = GpuType.objects.filter(key=gpu).first()
        if gpu_type is None:
            raise ApiError("not_found", f"no GPU type {gpu!r}")
        shape = self._shape(request, problem)
        track = request.query_params.get("track", RankingTrack.ALL)
        if track not in RankingTrack.values:
            raise ApiError("invalid", f"track must be one of {', '.join(RankingTrack.values)}", "track")
        version = self._version(request, problem)
        page, size = page_bounds(request)
        order = ("-score", "submitted_at", "id") if shape is None else ("median_us", "submitted_at", "id")
        rows = RankingEntry.objects.filter(
            problem=problem, problem_version=version, gpu_type=gpu_type, shape=shape, track=track
        )
        start = (page - 1) * size
        chosen = rows.select_related("user", "submission__origin").order_by(*order)[start:start + size]
        return Response({
            "problem": problem.name, "version": version, "current_version": problem.version,
            "gpu_type": gpu_type.key, "shape": shape.shape_id if shape else None,
            "track": track, "order": "score" if shape is None else "median_us", "count": rows.count(),
            "page": page, "page_size": size,
            "results": [self._row(start + position, row) for position, row in enumerate(chosen, start=1)],
            "references": references_body(problem, gpu_type, version, shape),
        })

    @staticmethod
    def _version(request: Request, problem: Problem) -> int:
        raw = request.query_params.get("version")
        if raw is None:  # absent; an empty value is refused below, as the schema's integer says
            return problem.version
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not 1 <= int(raw) <= problem.version:
            raise ApiError("invalid", f"version must be an integer from 1 to {problem.version}", "version")
        return int(raw)

    @staticmethod
    def _shape(request: Request, problem: Problem) -> Shape | None:
        shape_id = request.query_params.get("shape")
        if not shape_id:
            return None
        shape = problem.shapes.filter(shape_id=shape_id).first()
        if shape is None:
            raise ApiError("not_found", f"{problem.name} has no shape {shape_id!r}", "shape")
        return shape

    @staticmethod
    def _row(rank: int, row: RankingEntry) -> dict[str, Any]:
        return {"rank": rank, "user": row.user.get_username(), "agent": agent_of(row.submission),
                "submission_id": row.submission_id, "evaluation_id": row.evaluation_id,
                "language": row.submission.language, "score": row.score, "median_us": row.median_us,
                "features_met": row.features_met, "submitted_at": row.submitted_at}
