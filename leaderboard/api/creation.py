"""Creating submissions through the API: quotas, idempotency, agent origin, dry runs, re-runs.

Every kernel still enters through ``leaderboard.submissions`` (``check_submission``, then
``save_submission``: the checks live there); this module wraps them. Checks, compiles included, run
before any transaction; the saving is serialised on the user's row (``quotas.lock_user``), so a
quota's last unit and an ``Idempotency-Key`` are each taken once even when an agent fires the same
request twice at the same moment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from evaluator.ptx.sourcetext import text_problem
from leaderboard.api import quotas
from leaderboard.api.errors import ApiError, from_validation_error, too_large
from leaderboard.api.serializers import max_source_bytes
from leaderboard.compile_limits import CompileBusy
from leaderboard.dispatch import enqueue_on_commit
from leaderboard.models import (
    ApiToken,
    Evaluation,
    GpuType,
    IdempotencyRecord,
    Submission,
    SubmissionOrigin,
)
from leaderboard.submissions import CheckedSubmission, check_submission, save_submission

MAX_IDEMPOTENCY_KEY = 255


@dataclass(frozen=True)
class SubmitRequest:
    problem: str
    language: str
    gpu_types: tuple[str, ...]
    source: str
    mode: str
    launch_spec: str | None = None

    @classmethod
    def from_validated(cls, data: dict[str, Any]) -> SubmitRequest:
        return cls(problem=data["problem"], language=data["language"],
                   gpu_types=tuple(dict.fromkeys(data["gpu_types"])), source=data["source"],
                   mode=data["mode"], launch_spec=data.get("launch_spec") or None)

    def precheck(self) -> None:
        """Cheap checks with precise codes before anything is locked or compiled."""
        for field, text in (("source", self.source), ("launch_spec", self.launch_spec or "")):
            problem = text_problem(text) if text else None
            if problem:  # a lone surrogate (a JSON escape) cannot even be encoded: say so, no 500
                raise ApiError("invalid_source", problem, field)
        size = len(self.source.encode("utf-8"))
        if size > max_source_bytes():
            raise too_large("source", size, max_source_bytes())
        if not self.source.strip():
            raise ApiError("invalid_source", "the source is empty", "source")
        if "\0" in self.source:
            raise ApiError("invalid_source", "the source contains a NUL byte", "source")

    def quota_request(self) -> quotas.Request:
        return quotas.Request(self.problem, self.gpu_types)


def request_fingerprint(data: Any) -> str:
    """sha256 of the request body as canonical JSON: formatting and key order do not matter."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def check_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ApiError("invalid_idempotency_key",
                       f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} characters", "Idempotency-Key")
    return key


def previous_answer(user: Any, key: str | None, endpoint: str, fingerprint: str) -> IdempotencyRecord | None:
    """The record of an earlier request with this key; 409 when that request was different."""
    if key is None:
        return None
    record = IdempotencyRecord.objects.filter(user=user, key=key).first()
    if record is None:
        return None
    if record.endpoint != endpoint or record.request_sha256 != fingerprint:
        raise ApiError(
            "idempotency_conflict",
            f"Idempotency-Key {key!r} was used for a different request "
            f"({record.endpoint} at {record.created_at.isoformat()}); use a new key",
            "Idempotency-Key",
        )
    return record


def check(user: Any, request: SubmitRequest) -> CheckedSubmission:
    """Every check of a create, the PTX/CUDA build included; outside any transaction."""
    request.precheck()
    try:
        return check_submission(user, request.problem, request.language, request.source,
                                list(request.gpu_types), request.mode, launch_spec=request.launch_spec)
    except CompileBusy:
        raise
    except ValidationError as error:
        raise from_validation_error(error, request.language) from None


def _save(user: Any, token: ApiToken | None, checked: CheckedSubmission) -> Submission:
    """The submission and its origin row; inside the caller's transaction, after the quota check."""
    submission = save_submission(user, checked)
    agent = token.agent if token is not None else None
    SubmissionOrigin.objects.create(
        submission=submission, token=token, agent_name=agent.name if agent else "",
        agent_model=agent.model if agent else "", agent_version=agent.version if agent else "",
    )
    return submission


def _replayed(user: Any, key: str | None, fingerprint: str) -> Submission | None:
    record = previous_answer(user, key, "create", fingerprint)
    return record.submission if record is not None else None


def create_one(user: Any, token: ApiToken | None, request: SubmitRequest, key: str | None,
               fingerprint: str) -> tuple[Submission, bool]:
    """(submission, replayed): a retry with the same key and body returns the original.

    Checked (and compiled) first, with no lock held; then, in one short transaction serialised on
    the user's row, the idempotency key and the quota are checked again and the rows saved."""
    earlier = _replayed(user, key, fingerprint)
    if earlier is not None:
        return earlier, True
    quotas.check(user, [request.quota_request()], token)  # before compiling: a spent quota costs no nvcc run
    checked = check(user, request)
    with transaction.atomic():
        quotas.lock_user(user)
        earlier = _replayed(user, key, fingerprint)  # a concurrent retry may have saved it meanwhile
        if earlier is not None:
            return earlier, True
        quotas.check(user, [request.quota_request()], token)
        submission = _save(user, token, checked)
        if key is not None:
            IdempotencyRecord.objects.create(
                user=user,
                key=key,
                endpoint="create",
                request_sha256=fingerprint,
                status_code=201,
                submission=submission,
            )
    return submission, False


def save_item(
    user: Any, token: ApiToken | None, request: SubmitRequest, checked: CheckedSubmission
) -> Submission:
    """One checked item of a batch, in its own savepoint: one refusal leaves the others standing."""
    with transaction.atomic():
        quotas.check(user, [request.quota_request()], token)
        return _save(user, token, checked)


def dry_run(user: Any, request: SubmitRequest) -> dict[str, Any]:
    """Every check of a create, nothing saved (nothing to roll back: checks write nothing)."""
    evidence = check(user, request).evidence
    try:
        quotas.check(user, [request.quota_request()])
        quota_note = None
    except ApiError as error:
        quota_note = error.message
    return {"ok": True, "language": request.language, "static_evidence": evidence, "quota": quota_note}


def rerun(
    user: Any, submission: Submission, gpu_keys: list[str] | None, mode: str | None
) -> list[Evaluation]:
    """New evaluations (run_number + 1) of an owner's submission whose evaluations all ended.

    Only on GPU types the submission was already evaluated on: a PTX/CUDA upload was assembled
    for exactly those targets when it was accepted."""
    if submission.user_id != user.pk:
        raise ApiError("not_found", f"no submission {submission.pk} of yours")
    with transaction.atomic():
        quotas.lock_user(user)
        previous = list(submission.evaluations.select_related("gpu_type").order_by("-run_number", "id"))
        if any(not evaluation.is_terminal for evaluation in previous):
            raise ApiError("still_running", "a re-run needs every evaluation of the submission to have ended")
        gpus = _rerun_gpu_types(previous, gpu_keys)
        mode = mode or previous[0].mode
        quotas.check(user, [quotas.Request(submission.problem.name, tuple(gpu.key for gpu in gpus))])
        created = [_next_run(submission, gpu, mode) for gpu in gpus]
        enqueue_on_commit(user.pk, [gpu.pk for gpu in gpus])
    return created


def _rerun_gpu_types(previous: list[Evaluation], keys: list[str] | None) -> list[GpuType]:
    known = {evaluation.gpu_type.key: evaluation.gpu_type for evaluation in previous}
    if not keys:
        return list(known.values())
    missing = [key for key in dict.fromkeys(keys) if key not in known]
    if missing:
        raise ApiError("unknown_gpu_type", f"this submission was never evaluated on {', '.join(missing)}; "
                       f"re-run on {', '.join(sorted(known))}, or submit it again", "gpu_types")
    return [known[key] for key in dict.fromkeys(keys)]


def _next_run(submission: Submission, gpu: GpuType, mode: str) -> Evaluation:
    last = (Evaluation.objects.filter(submission=submission, gpu_type=gpu, mode=mode)
            .aggregate(n=Max("run_number"))["n"]) or 0
    return Evaluation.objects.create(submission=submission, gpu_type=gpu, mode=mode, run_number=last + 1)
