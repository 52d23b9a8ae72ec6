"""The data model, one module per concern; import models from here."""

from __future__ import annotations

from leaderboard.models.automation import IdempotencyRecord, SubmissionOrigin, WebhookDelivery
from leaderboard.models.catalogue import GpuType, Problem, Shape
from leaderboard.models.evaluations import (
    ALLOWED_TRANSITIONS,
    TERMINAL_STATUSES,
    Evaluation,
    EvaluationStatus,
    IllegalTransition,
    Mode,
    ShapeResult,
    transition_allowed,
)
from leaderboard.models.integrity import Withdrawal
from leaderboard.models.rankings import RankingEntry, RankingTrack
from leaderboard.models.references import REFERENCE_USER, ReferenceLine, is_reference_submission
from leaderboard.models.runners import RunnerAuthFailure, RunnerCredential, RunnerMessageNonce, RunnerNode
from leaderboard.models.submissions import Language, SourceMismatch, Submission, sha256_text
from leaderboard.models.tokens import ApiToken

__all__ = [
    "ALLOWED_TRANSITIONS",
    "REFERENCE_USER",
    "TERMINAL_STATUSES",
    "ApiToken",
    "Evaluation",
    "EvaluationStatus",
    "GpuType",
    "IdempotencyRecord",
    "IllegalTransition",
    "Language",
    "Mode",
    "Problem",
    "RankingEntry",
    "RankingTrack",
    "ReferenceLine",
    "RunnerAuthFailure",
    "RunnerCredential",
    "RunnerMessageNonce",
    "RunnerNode",
    "Shape",
    "ShapeResult",
    "SourceMismatch",
    "Submission",
    "SubmissionOrigin",
    "WebhookDelivery",
    "Withdrawal",
    "is_reference_submission",
    "sha256_text",
    "transition_allowed",
]
