"""The operator's view of everything. Secrets stay out: no secret seed, no token hash."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from leaderboard.dispatch.admin_actions import cancel_selected, issued_page, replace_selected, revoke_selected
from leaderboard.dispatch.credentials import new_credential
from leaderboard.models import (
    ApiToken,
    Evaluation,
    GpuType,
    IdempotencyRecord,
    Problem,
    RankingEntry,
    RunnerAuthFailure,
    RunnerCredential,
    RunnerNode,
    Shape,
    ShapeResult,
    Submission,
    SubmissionOrigin,
    WebhookDelivery,
    Withdrawal,
)
from leaderboard.withdrawals import withdraw_action


@admin.register(GpuType)
class GpuTypeAdmin(admin.ModelAdmin):
    list_display = [
        "key",
        "name",
        "arch",
        "hbm_bytes_per_s",
        "estimated",
        "verified_on_hardware",
        "development_device",
    ]
    list_filter = ["estimated", "verified_on_hardware", "development_device", "arch"]
    search_fields = ["key", "name"]
    readonly_fields = ["synced_at"]


class ShapeInline(admin.TabularInline):
    model = Shape
    extra = 0
    fields = ["position", "shape_id", "axes", "ranked", "quick", "cpu", "active", "counts"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "kind", "world_size", "version", "active", "synced_at"]
    list_filter = ["active", "kind", "world_size"]
    search_fields = ["name", "title", "catalogue_sha256"]
    readonly_fields = ["catalogue_sha256", "created_at", "synced_at"]
    date_hierarchy = "synced_at"
    inlines = [ShapeInline]


@admin.register(Shape)
class ShapeAdmin(admin.ModelAdmin):
    list_display = ["problem", "shape_id", "ranked", "quick", "cpu", "active", "position"]
    list_filter = ["problem", "ranked", "quick", "cpu", "active"]
    search_fields = ["shape_id", "problem__name"]


@admin.register(RunnerNode)
class RunnerNodeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "hostname",
        "gpu_type",
        "gpu_count",
        "alive",
        "last_heartbeat",
        "current_job_id",
        "version",
    ]
    list_filter = ["gpu_type", "gpu_count", "version"]
    search_fields = ["name", "hostname", "current_job_id"]
    readonly_fields = ["registered_at", "last_heartbeat", "gpus", "queues", "calibration"]
    date_hierarchy = "registered_at"

    @admin.display(boolean=True)
    def alive(self, runner: RunnerNode) -> bool:
        return runner.is_alive


@admin.register(RunnerCredential)
class RunnerCredentialAdmin(admin.ModelAdmin):
    """Issue (add: the credential is shown once, on the page that follows), list, revoke. The key
    is derived from SECRET_KEY, stored nowhere, so no page can show it again."""

    list_display = ["public_id", "node_name", "key_fingerprint", "active", "created_at", "created_by",
                    "last_used_at", "messages_accepted"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "node_name"]
    search_fields = ["public_id", "node_name", "key_fingerprint"]
    readonly_fields = [
        "public_id",
        "key_fingerprint",
        "created_at",
        "created_by",
        "revoked_at",
        "last_used_at",
        "messages_accepted",
    ]
    actions = [revoke_selected, replace_selected]

    @admin.display(boolean=True)
    def active(self, row: RunnerCredential) -> bool:
        return row.is_active

    def get_readonly_fields(self, request: Any, obj: RunnerCredential | None = None) -> list[str]:
        return self.readonly_fields + (["node_name"] if obj is not None else [])

    def save_model(self, request: Any, obj: RunnerCredential, form: Any, change: bool) -> None:
        if not change:
            credential = new_credential(obj.node_name)
            obj.public_id, obj.key_fingerprint = credential.public_id, credential.fingerprint
            obj.created_by = str(request.user)[:150]
            request._issued_runner_credential = credential.secret_string()
        super().save_model(request, obj, form, change)

    def response_add(self, request: Any, obj: RunnerCredential, post_url_continue: str | None = None) -> Any:
        return issued_page(self, request, [(obj, request._issued_runner_credential)])


@admin.register(RunnerAuthFailure)
class RunnerAuthFailureAdmin(admin.ModelAdmin):
    """Runner messages refused by the site (unsigned, bad MAC, stale, replayed, wrong node...)."""

    list_display = ["reason", "credential", "count", "first_at", "last_at", "last_task", "last_detail"]
    list_filter = ["reason"]
    readonly_fields = list_display

    def has_add_permission(self, request: Any) -> bool:
        return False


class EvaluationInline(admin.TabularInline):
    model = Evaluation
    extra = 0
    fields = ["gpu_type", "mode", "run_number", "status", "score", "runner", "queued_at", "finished_at"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "problem", "language", "public", "created_at", "short_sha"]
    list_filter = ["problem", "language", "public"]
    search_fields = ["user__username", "source_sha256", "filename"]
    readonly_fields = ["source_sha256", "created_at"]
    date_hierarchy = "created_at"
    raw_id_fields = ["user"]
    inlines = [EvaluationInline]

    @admin.display(description="sha256")
    def short_sha(self, submission: Submission) -> str:
        return submission.source_sha256[:12]


class ShapeResultInline(admin.TabularInline):
    model = ShapeResult
    extra = 0
    fields = [
        "shape",
        "status",
        "correct",
        "median_us",
        "baseline_median_us",
        "t_sol_us",
        "sol_fraction",
        "score",
    ]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    """One row per evaluation, read as the site shows it: its submission (problem, user), then the
    GPU type, mode and run; the evaluation's own id last, for support and logs."""

    list_display = ["run_label", "problem", "user", "status", "evaluator_status", "score", "rank_eligible",
                    "runner", "attempts", "queued_at", "finished_at", "id"]
    list_display_links = ["run_label"]
    list_filter = ["status", "mode", "gpu_type", "rank_eligible", "cancel_requested", "submission__problem",
                   "submission__language"]
    search_fields = ["=job_id", "submission__user__username", "submission__source_sha256", "runner__name"]
    exclude = ["secret_seed"]
    readonly_fields = ["job_id", "submission", "report", "log", "telemetry", "flags", "evaluator_status",
                       "queued_at", "enqueued_at", "started_at", "finished_at", "attempts", "queue"]
    date_hierarchy = "queued_at"
    list_select_related = ["submission__problem", "submission__user", "gpu_type", "runner"]
    inlines = [ShapeResultInline]
    actions = [cancel_selected, "withdraw_from_rankings"]

    @admin.display(description="run", ordering="submission_id")
    def run_label(self, evaluation: Evaluation) -> str:
        return (f"submission {evaluation.submission_id} · {evaluation.gpu_type.key} {evaluation.mode} "
                f"run {evaluation.run_number}")

    @admin.display(description="problem", ordering="submission__problem__name")
    def problem(self, evaluation: Evaluation) -> str:
        return evaluation.submission.problem.name

    @admin.display(description="user", ordering="submission__user__username")
    def user(self, evaluation: Evaluation) -> str:
        return str(evaluation.submission.user.get_username())

    @admin.action(description="Withdraw from rankings (with a public note)")
    def withdraw_from_rankings(self, request: Any, queryset: Any) -> Any:
        return withdraw_action(self, request, queryset)


@admin.register(ShapeResult)
class ShapeResultAdmin(admin.ModelAdmin):
    list_display = [
        "evaluation",
        "shape",
        "status",
        "correct",
        "median_us",
        "sol_fraction",
        "score",
        "speedup",
    ]
    list_filter = ["status", "correct", "shape__ranked", "shape__problem", "evaluation__gpu_type"]
    search_fields = ["=evaluation__job_id", "evaluation__submission__user__username"]
    readonly_fields = ["errors", "checks", "telemetry", "profile"]
    raw_id_fields = ["evaluation"]


@admin.register(RankingEntry)
class RankingEntryAdmin(admin.ModelAdmin):
    list_display = ["problem", "problem_version", "gpu_type", "shape", "track", "user", "score", "median_us",
                    "submitted_at", "evaluation"]
    list_filter = ["problem", "problem_version", "gpu_type", "track", ("shape", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "submission__source_sha256"]
    raw_id_fields = ["user", "submission", "evaluation", "shape"]
    date_hierarchy = "submitted_at"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "user", "agent_name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "user__username", "agent_name"]
    exclude = ["token_hash", "webhook_secret"]  # never shown: the hash and the signing secret
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    raw_id_fields = ["user"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: object) -> bool:
        return False  # the plain token must be shown once: `manage.py create_api_token`


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """What the site worker owes callback URLs; a failed one shows its last error."""

    list_display = ["id", "evaluation", "token", "state", "attempts", "next_attempt_at", "response_status"]
    list_filter = ["state"]
    search_fields = ["url", "token__prefix"]
    readonly_fields = ["evaluation", "token", "url", "payload", "attempts", "last_error", "response_status",
                       "created_at", "delivered_at"]
    date_hierarchy = "created_at"


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(admin.ModelAdmin):
    list_display = ["user", "key", "endpoint", "status_code", "submission", "created_at"]
    search_fields = ["user__username", "key"]
    readonly_fields = ["user", "key", "endpoint", "request_sha256", "status_code", "submission", "response",
                       "created_at"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: object) -> bool:
        return False  # made by the API only


@admin.register(SubmissionOrigin)
class SubmissionOriginAdmin(admin.ModelAdmin):
    list_display = ["submission", "agent_name", "agent_model", "agent_version", "token"]
    search_fields = ["agent_name", "agent_model"]
    readonly_fields = ["submission", "token", "agent_name", "agent_model", "agent_version"]

    def has_add_permission(self, request: object) -> bool:
        return False  # copied from the token at submission time


@admin.register(Withdrawal)
class WithdrawalAdmin(admin.ModelAdmin):
    """Made by the evaluation list's "withdraw from rankings" action; never edited afterwards."""

    list_display = ["evaluation", "operator_name", "withdrawn_at", "note"]
    search_fields = ["operator_name", "note", "evaluation__submission__user__username"]
    readonly_fields = ["evaluation", "withdrawn_by", "operator_name", "withdrawn_at", "note"]
    date_hierarchy = "withdrawn_at"

    def has_add_permission(self, request: Any) -> bool:
        return False
