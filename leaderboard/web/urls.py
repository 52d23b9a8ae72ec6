"""The website's URLs (included from leaderboard/urls.py)."""

from __future__ import annotations

from django.urls import path

from leaderboard.web import accounts, docs, pages, problems, submission_views, tokens, upload

urlpatterns = [
    path("", pages.home, name="home"),
    path("problems/<slug:name>/", problems.problem_page, name="problem"),
    path("submit/", upload.upload, name="submit"),
    path("submissions/<int:pk>/", submission_views.submission_page, name="submission"),
    path("submissions/<int:pk>/status", submission_views.submission_status, name="submission-status"),
    path("submissions/<int:pk>/cancel", submission_views.cancel, name="submission-cancel"),
    path("submissions/<int:pk>/rerun", submission_views.rerun, name="submission-rerun"),
    path("submissions/<int:pk>/publish", submission_views.publish, name="submission-publish"),
    path("users/<str:username>/", pages.user_page, name="user-page"),
    path("integrity/", pages.integrity_log, name="integrity-log"),
    path("account/tokens/", tokens.tokens_page, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke", tokens.revoke_token, name="api-token-revoke"),
    path("accounts/signup/", accounts.sign_up, name="sign-up"),
    path("accounts/login/", accounts.SignInView.as_view(), name="login"),
    path("accounts/logout/", accounts.SignOutView.as_view(), name="logout"),
    path("docs/", docs.docs_index, name="docs"),
    path("docs/<slug:name>.md", docs.doc_page, name="doc"),
]
