"""The pages and probes of the foundation: /healthz, the home page, the API schema, the admin."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from leaderboard.models import Evaluation, Problem, Submission

pytestmark = pytest.mark.django_db

#: Nothing listens on port 1: connecting is refused at once.
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def test_healthz_is_200_when_the_database_and_the_broker_answer(client: Client) -> None:
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "healthy"
    assert body["database"]["ok"] and body["broker"]["ok"]


def test_healthz_is_503_with_the_error_when_the_broker_is_unreachable(client: Client, settings: Any) -> None:
    settings.CELERY_BROKER_URL = UNREACHABLE_BROKER
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unhealthy"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is False and body["broker"]["error"]


def test_the_home_page_lists_the_synced_problems(client: Client, problems: dict[str, Problem],
                                                 gpu_types: Any) -> None:
    page = client.get("/").content.decode()
    for problem in problems.values():
        assert problem.title in page or problem.name in page
    assert "development board: ranked only among CPU results" in page


def test_the_api_schema_and_docs_are_served(client: Client) -> None:
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


def test_the_api_docs_load_every_asset_from_the_site_itself(client: Client) -> None:
    """Swagger UI works without the internet: no CDN, every script, style and icon is one of the
    site's static files."""
    page = client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(url.endswith("swagger-ui-bundle.js") for url in assets), assets
    static = "/" + settings.STATIC_URL.lstrip("/")
    for url in assets:
        assert url.startswith(static), f"{url} is not served by the site"
        assert finders.find(url.removeprefix(static)), f"{url} is not among the static files"


def test_every_admin_list_and_change_page_opens_for_an_operator(
    client: Client, operator: Any, alice: Any, problems: dict[str, Problem], gpu_types: Any
) -> None:
    submission = Submission.objects.create(user=alice, problem=next(iter(problems.values())),
                                           problem_version=1, language="python", source="pass\n")
    evaluation = Evaluation.objects.create(submission=submission, gpu_type=gpu_types["h100"], mode="ranked")
    client.force_login(operator)
    from django.contrib import admin

    for model in admin.site._registry:
        if model._meta.app_label != "leaderboard":
            continue
        url = reverse(f"admin:leaderboard_{model._meta.model_name}_changelist")
        assert client.get(url).status_code == 200, url
    page = client.get(reverse("admin:leaderboard_evaluation_change", args=[evaluation.pk])).content.decode()
    assert str(evaluation.job_id) in page
    assert str(evaluation.secret_seed) not in page


def test_admin_lists_filter_by_status_and_gpu_type(client: Client, operator: Any) -> None:
    client.force_login(operator)
    url = reverse("admin:leaderboard_evaluation_changelist")
    assert client.get(url, {"status": "queued", "gpu_type__id__exact": "1"}).status_code == 200


def test_admin_search_finds_evaluations_by_user_sha256_or_job_id(
    client: Client, operator: Any, alice: Any, problems: dict[str, Problem], gpu_types: Any
) -> None:
    submission = Submission.objects.create(user=alice, problem=next(iter(problems.values())),
                                           problem_version=1, language="python", source="pass\n")
    evaluation = Evaluation.objects.create(submission=submission, gpu_type=gpu_types["h100"], mode="ranked")
    client.force_login(operator)
    url = reverse("admin:leaderboard_evaluation_changelist")
    for term in ("alice", submission.source_sha256[:16], str(evaluation.job_id)):
        response = client.get(url, {"q": term})
        assert response.status_code == 200, term
        assert response.context["cl"].result_count == 1, term


def test_the_admin_evaluation_list_names_the_submission_problem_and_user(
    client: Client, operator: Any, alice: Any, problems: dict[str, Problem], gpu_types: Any
) -> None:
    submission = Submission.objects.create(user=alice, problem=problems["vector_add"], problem_version=1,
                                           language="python", source="pass\n")
    Evaluation.objects.create(submission=submission, gpu_type=gpu_types["h100"], mode="ranked")
    client.force_login(operator)
    page = client.get(reverse("admin:leaderboard_evaluation_changelist")).content.decode()
    row = page[page.index('class="field-run_label"'):]
    row = row[: row.index("</tr>")]
    assert f"submission {submission.pk} · h100 ranked run 1" in row
    assert ">vector_add<" in row and ">alice<" in row
    assert f"#{submission.pk} " not in page  # Submission.__str__'s "#22 37 by 1"


def test_favicon_ico_is_served(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"


def test_the_docs_are_served_as_pages_and_links_between_them_resolve(client: Client) -> None:
    page = client.get("/docs/ptx.md").content.decode()
    assert "<h1>" in page and "PTX" in page
    assert client.get("/docs/no-such-doc.md").status_code == 404
    assert client.get("/docs/..%2Fsettings.md").status_code == 404
    index = client.get("/docs/").content.decode()
    assert 'href="/docs/api.md"' in index and 'href="/docs/website.md"' in index
