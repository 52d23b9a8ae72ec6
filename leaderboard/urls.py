from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from leaderboard import metrics, views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", metrics.metrics_view, name="metrics"),  # Prometheus; token or loopback only
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("leaderboard.api.urls")),  # the REST API (docs/api.md)
    path("", include("leaderboard.runner_views")),
    path("", include("leaderboard.web.urls")),  # the website: home, problems, reports, uploads, accounts
]

handler400 = "leaderboard.web.errors.bad_request"  # a too-large upload gets a 413 that says so

