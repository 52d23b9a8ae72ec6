"""No N+1 queries: the ranking, report, home and user pages make as many queries for a long list
as for a short one (and few in absolute terms)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.leaderboard.web_helpers import evaluate, gpu_report, ranked, submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    """Every request renders from the database (the page cache is tested on its own)."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0

#: Anonymous page views: session and user lookups do not happen; these are the pages' own queries.
CEILING = 16


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def people(count: int, start: int = 0) -> list[Any]:
    model = get_user_model()
    return [model.objects.create_user(username=f"user{start + i}", password="x") for i in range(count)]


def test_the_ranking_page_costs_the_same_for_two_users_as_for_eight(client: Client, problems: Any,
                                                                     gpu_types: Any) -> None:
    for index, person in enumerate(people(2)):
        ranked(person, "vector_add", "h200", 1.0 + index / 10)
    ranked(person, "vector_add", "h200", 1.5, witnessed=False)
    few = queries(client, "/problems/vector_add/?gpu=h200")
    for index, person in enumerate(people(6, start=2)):
        ranked(person, "vector_add", "h200", 0.6 + index / 10)
        ranked(person, "vector_add", "h200", 0.5 + index / 10, witnessed=False)  # provisional rows too
    assert queries(client, "/problems/vector_add/?gpu=h200") == few <= CEILING


def test_the_report_costs_the_same_for_one_gpu_type_as_for_three(client: Client, alice: Any, problems: Any,
                                                                  gpu_types: Any) -> None:
    single = ranked(alice, "vector_add", "h200", 1.2)
    one = queries(client, f"/submissions/{single.submission_id}/")
    several = ranked(alice, "vector_add", "h100", 1.2)
    for key in ("h200", "b200"):
        extra = type(several).objects.create(
            submission=several.submission, gpu_type=gpu_types[key], mode="ranked"
        )
        evaluate(extra, gpu_report("vector_add", key, 1.1))
    assert queries(client, f"/submissions/{several.submission_id}/") == one <= CEILING


def test_the_home_page_costs_the_same_with_one_record_as_with_many(client: Client, problems: Any,
                                                                   gpu_types: Any) -> None:
    person, other = people(2)
    ranked(person, "vector_add", "h200", 1.2)
    one = queries(client, "/")
    for problem in ("softmax", "rmsnorm", "vector_add"):
        for gpu in ("h100", "b200"):
            ranked(other, problem, gpu, 1.1)
    submit(person, "softmax", "h100")
    assert queries(client, "/") == one <= CEILING


def test_the_user_page_costs_the_same_for_one_submission_as_for_many(client: Client, alice: Any,
                                                                     problems: Any, gpu_types: Any) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    one = queries(client, "/users/alice/")
    for problem in ("softmax", "rmsnorm"):
        ranked(alice, problem, "h100", 1.1)
        submit(alice, problem, "h200")
    assert queries(client, "/users/alice/") == one <= CEILING
