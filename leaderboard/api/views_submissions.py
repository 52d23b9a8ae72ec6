"""Submissions: create (single, batch, dry run), list own, detail, cancel, re-run."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from leaderboard.api import batch, creation
from leaderboard.api import serializers as s
from leaderboard.api.auth import API_AUTHENTICATION
from leaderboard.api.errors import ApiError
from leaderboard.api.parsers import BoundedJSONParser
from leaderboard.api.presenters import availability_warnings, submission_body, submission_summary
from leaderboard.dispatch import CancelNotAllowed, cancel_evaluation
from leaderboard.models import EvaluationStatus, Submission

ERRORS = {code: OpenApiResponse(s.ErrorSerializer, description=text) for code, text in {
    400: "invalid request (code says which check)", 401: "no or bad token", 404: "not found",
    409: "conflict", 413: "too large (limit stated)", 429: "quota or rate spent, or compiling (Retry-After)",
    503: "the site compiles as many uploads as it allows (Retry-After)"}.items()}
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^\S.*$"},
    OpenApiParameter.HEADER,
    required=False,
    description="A retry with the same key and body returns the original answer; "
    "a different body gets 409. No second job, no second quota charge.",
)
WAIT = OpenApiParameter(
    "wait",
    {"type": "number", "minimum": 0, "maximum": 60},
    OpenApiParameter.QUERY,
    required=False,
    description="Long-poll: answer at once on a change of status, else after this many "
    "seconds (at most the server's max_wait_seconds, 60).",
)
#: The highest page number asked for: beyond it an offset no database needs (SQLite's integers end
#: at 2^63; schemathesis found a 503 at page 3e18).
MAX_PAGE = 1_000_000
PAGE = OpenApiParameter("page", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, required=False)
PAGE_SIZE = OpenApiParameter("page_size", {"type": "integer", "minimum": 1}, required=False,
                             description="At most 200 (larger values are cut to 200).")
SINCE = OpenApiParameter("since", str, OpenApiParameter.QUERY, required=False,
                         description="With wait: the `state` you last saw; answers at once if it differs.")


class ApiView(APIView):
    authentication_classes: tuple[type, ...] = API_AUTHENTICATION
    permission_classes = (IsAuthenticated,)
    parser_classes = (BoundedJSONParser,)


def submission_for(request: Request, pk: int, owner_only: bool = False) -> Submission:
    """The submission, if the caller may see it (staff and owners always; others read-only)."""
    submission = (Submission.objects.select_related("problem", "user", "origin").filter(pk=pk).first())
    mine = submission is not None and (request.user.is_staff or submission.user_id == request.user.pk)
    if submission is None or (owner_only and not mine):
        raise ApiError("not_found", f"no submission {pk}" + (" of yours" if owner_only else ""))
    return submission


def own_submissions(request: Request) -> QuerySet[Submission]:
    rows = Submission.objects.filter(user=request.user).select_related("problem", "origin")
    problem = request.query_params.get("problem")
    return rows.filter(problem__name=problem) if problem else rows


def page_bounds(request: Request, default_size: int = 50, max_size: int = 200) -> tuple[int, int]:
    """(page, page_size) from the query, 1-based; 400 ``invalid`` when not positive integers or a
    page beyond MAX_PAGE (a page size beyond ``max_size`` is cut to it)."""
    values = []
    for name, default in (("page", 1), ("page_size", default_size)):
        raw = request.query_params.get(name, str(default))
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
            raise ApiError("invalid", f"{name} must be a positive integer, not {raw[:40]!r}", name)
        values.append(int(raw))
    if values[0] > MAX_PAGE:
        raise ApiError("invalid", f"page must be at most {MAX_PAGE}, not {values[0]}", "page")
    return values[0], min(values[1], max_size)


class SubmissionListCreateView(ApiView):
    @extend_schema(
        parameters=[OpenApiParameter("problem", str), PAGE, PAGE_SIZE],
        responses={200: s.SubmissionPageSerializer, **ERRORS},
        summary="Your submissions, newest first",
        operation_id="submissions_list",
    )
    def get(self, request: Request) -> Response:
        page, size = page_bounds(request)
        rows = own_submissions(request).prefetch_related("evaluations__gpu_type")
        count = rows.count()
        items = rows[(page - 1) * size: page * size]
        base = request.build_absolute_uri(request.path)
        return Response({
            "count": count,
            "next": f"{base}?page={page + 1}&page_size={size}" if page * size < count else None,
            "previous": f"{base}?page={page - 1}&page_size={size}" if page > 1 else None,
            "results": [submission_summary(item) for item in items],
        })

    @extend_schema(request=s.SubmitSerializer, parameters=[IDEMPOTENCY],
                   responses={201: s.SubmissionSerializer, **ERRORS}, summary="Submit a kernel")
    def post(self, request: Request) -> Response:
        serializer = s.SubmitSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = creation.check_idempotency_key(request.headers.get("Idempotency-Key"))
        submit = creation.SubmitRequest.from_validated(serializer.validated_data)
        submission, replayed = creation.create_one(request.user, request.auth, submit, key,
                                                   creation.request_fingerprint(request.data))
        headers = {"Location": f"/api/submissions/{submission.pk}"}
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(submission_body(submission, request.user), status=201, headers=headers)


class SubmissionBatchView(ApiView):
    @extend_schema(request=s.BatchSerializer, parameters=[IDEMPOTENCY],
                   responses={200: s.BatchResultSerializer, **ERRORS},
                   summary=f"Submit up to {s.MAX_BATCH} kernels; each validated on its own")
    def post(self, request: Request) -> Response:
        serializer = s.BatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        items = serializer.validated_data["submissions"]
        if len(items) > s.MAX_BATCH:
            raise ApiError(
                "batch_too_large",
                f"a batch holds at most {s.MAX_BATCH} submissions, not {len(items)}",
                "submissions",
                limit=s.MAX_BATCH,
            )
        key = creation.check_idempotency_key(request.headers.get("Idempotency-Key"))
        body, replayed = batch.create_batch(
            request.user,
            request.auth,
            items,
            key,
            creation.request_fingerprint(request.data),
            lambda submission: _jsonable(submission_body(submission, request.user)),
        )
        return Response(body, headers={"Idempotent-Replayed": "true"} if replayed else None)


def _jsonable(body: dict[str, Any]) -> dict[str, Any]:
    """Dates as ISO strings, so a batch answer can be stored for idempotent replays."""
    return json.loads(json.dumps(body, cls=JSONEncoder))


class SubmissionValidateView(ApiView):
    @extend_schema(request=s.SubmitSerializer, responses={200: s.ValidationResultSerializer, **ERRORS},
                   summary="Dry run: every check of a create (syntax, ptxas/nvcc, spec, size); nothing saved")
    def post(self, request: Request) -> Response:
        serializer = s.SubmitSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        batch.CHECKS.charge(request.user.pk)
        submit = creation.SubmitRequest.from_validated(serializer.validated_data)
        answer = creation.dry_run(request.user, submit)
        return Response({**answer, "warnings": availability_warnings(submit.problem, list(submit.gpu_types))})


class SubmissionDetailView(ApiView):
    permission_classes = (AllowAny,)

    @extend_schema(parameters=[WAIT, SINCE], responses={200: s.SubmissionSerializer, **ERRORS},
                   summary="A submission: status, queue position, full report (long-poll with ?wait=)")
    def get(self, request: Request, pk: int) -> Response:
        submission = submission_for(request, pk)
        return Response(submission_body(submission, request.user))


class SubmissionCancelView(ApiView):
    @extend_schema(request=s.CancelSerializer, responses={200: s.SubmissionSerializer, **ERRORS},
                   summary="Cancel what is still queued or running (a queued one's quota is given back)")
    def post(self, request: Request, pk: int) -> Response:
        submission = submission_for(request, pk, owner_only=True)
        serializer = s.CancelSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        wanted = serializer.validated_data.get("gpu_types")
        live = submission.evaluations.filter(status__in=(EvaluationStatus.QUEUED, EvaluationStatus.RUNNING))
        if wanted:
            live = live.filter(gpu_type__key__in=wanted)
        try:
            cancelled = sum(cancel_evaluation(evaluation, request.user)
                            for evaluation in live.select_related("submission", "runner"))
        except CancelNotAllowed as error:
            raise ApiError("not_found", str(error)) from None
        if not cancelled:
            raise ApiError("not_cancellable", f"submission {pk} has nothing queued or running to cancel")
        return Response(submission_body(submission, request.user))


class SubmissionRerunView(ApiView):
    @extend_schema(request=s.RerunSerializer, responses={201: s.SubmissionSerializer, **ERRORS},
                   summary="Re-run your submission (new evaluations, charged to your quota)")
    def post(self, request: Request, pk: int) -> Response:
        submission = submission_for(request, pk, owner_only=True)
        serializer = s.RerunSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        creation.rerun(request.user, submission, data.get("gpu_types"), data.get("mode"))
        return Response(submission_body(submission, request.user), status=201)
