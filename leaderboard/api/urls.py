"""``/api/...``: mounted by leaderboard/urls.py (``/api/runners/`` lives in runner_views)."""

from __future__ import annotations

from django.urls import path

from leaderboard.api import views_account, views_catalogue, waiting
from leaderboard.api import views_submissions as subs

urlpatterns = [
    path("", views_account.MetaView.as_view(), name="api-meta"),
    path("tokens", views_account.TokenListCreateView.as_view(), name="api-tokens"),
    path("tokens/<int:pk>", views_account.TokenRevokeView.as_view(), name="api-token"),
    path("quota", views_account.QuotaView.as_view(), name="api-quota"),
    path("problems", views_catalogue.ProblemListView.as_view(), name="api-problems"),
    path("problems/<slug:name>", views_catalogue.ProblemDetailView.as_view(), name="api-problem"),
    path(
        "problems/<slug:name>/references",
        views_catalogue.ReferenceLinesView.as_view(),
        name="api-problem-references",
    ),
    path("gpu-types", views_catalogue.GpuTypeListView.as_view(), name="api-gpu-types"),
    path(
        "leaderboards/<slug:name>/<slug:gpu>",
        views_catalogue.LeaderboardView.as_view(),
        name="api-leaderboard",
    ),
    path("submissions", subs.SubmissionListCreateView.as_view(), name="api-submissions"),
    path("submissions/batch", subs.SubmissionBatchView.as_view(), name="api-submissions-batch"),
    path("submissions/validate", subs.SubmissionValidateView.as_view(), name="api-submissions-validate"),
    path("submissions/<int:pk>", waiting.submission_detail, name="api-submission"),
    path("submissions/<int:pk>/events", waiting.submission_events, name="api-submission-events"),
    path("submissions/<int:pk>/cancel", subs.SubmissionCancelView.as_view(), name="api-submission-cancel"),
    path("submissions/<int:pk>/rerun", subs.SubmissionRerunView.as_view(), name="api-submission-rerun"),
]
