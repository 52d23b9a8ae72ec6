"""A problem's new catalogue version (a faster baseline, issue 16) starts rankings of its own: the
old version's stay readable (ranking rows, the problem page, the API), new submissions are made
against the new version and rank there, and the home page's leaders are the current version's.

The cast (tests/conftest.py): alice ranks under version 1; after the bump bob and alice rank under
version 2. Results are stored through the site's own path (tests/leaderboard/web_helpers.py).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from rest_framework.test import APIClient

from evaluator.problems import load_catalogue
from leaderboard.models import Evaluation, GpuType, Problem, RankingEntry
from leaderboard.ranking_maintenance import ranked_versions, ranking_rows
from leaderboard.submissions import create_submission
from leaderboard.sync import sync_problems
from tests.leaderboard.web_helpers import SOURCE, evaluate, gpu_report, ranked

pytestmark = pytest.mark.django_db

NAME = "vector_add"


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    """Every request renders from the database (the page cache is tested on its own)."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def bump() -> Problem:
    """The catalogue with vector_add one version newer (as a baseline change makes it), synced."""
    catalogue = load_catalogue()
    newer = dataclasses.replace(catalogue[NAME], version=catalogue[NAME].version + 1)
    report = sync_problems({**catalogue, NAME: newer})
    assert report.updated == [NAME]
    return Problem.objects.get(name=NAME)


def ranked_now(user: Any, speed: float) -> Evaluation:
    """A ranked result submitted through the site now (against the stored, current version) and
    stored from a runner's report of that version."""
    submission = create_submission(user, NAME, "python", SOURCE, ["h200"], "ranked")
    evaluation = submission.evaluations.get()
    report = gpu_report(NAME, "h200", speed).model_copy(
        update={"problem_version": submission.problem_version}
    )
    outcome = evaluate(evaluation, report)
    assert outcome.startswith("stored"), outcome
    evaluation.refresh_from_db()
    return evaluation


def users(rows: list[RankingEntry]) -> list[str]:
    return [row.user.username for row in rows]


def test_after_a_bump_the_old_ranking_stays_and_new_submissions_rank_apart(
        alice: Any, bob: Any, catalogue: None) -> None:
    old = ranked(alice, NAME, "h200", 1.5)
    first = Problem.objects.get(name=NAME).version
    problem = bump()
    h200 = GpuType.objects.get(key="h200")

    assert ranking_rows(problem, h200) == []  # the new version starts empty
    assert users(ranking_rows(problem, h200, version=first)) == ["alice"]

    newer = ranked_now(bob, 0.8)
    mine = ranked_now(alice, 0.6)  # slower than her old result, which holds no row here
    assert newer.submission.problem_version == mine.submission.problem_version == first + 1
    assert users(ranking_rows(problem, h200)) == ["bob", "alice"]
    assert ranking_rows(problem, h200)[1].evaluation_id == mine.pk
    assert [(row.user.username, row.evaluation_id) for row in ranking_rows(problem, h200, version=first)] == [
        ("alice", old.pk)]
    shape = problem.shapes.filter(ranked=True, active=True).first()
    assert users(ranking_rows(problem, h200, shape)) == ["bob", "alice"]
    assert users(ranking_rows(problem, h200, shape, version=first)) == ["alice"]
    assert ranked_versions(problem) == [first + 1, first]


def test_the_problem_page_shows_the_current_version_and_an_older_one_on_request(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, NAME, "h200", 1.5)
    first = Problem.objects.get(name=NAME).version
    bump()
    ranked_now(bob, 0.8)

    current = client.get(f"/problems/{NAME}/?gpu=h200").content.decode()
    board = current[current.index('data-board="problem"'):]
    board = board[: board.index("</table>")]
    assert 'data-user="bob"' in board and 'data-user="alice"' not in board
    assert "torch.add(a, b, out=c)" in board  # the current baseline, named
    assert f"version={first}" in current  # a link to the old version's rankings

    old = client.get(f"/problems/{NAME}/?gpu=h200&version={first}").content.decode()
    board = old[old.index('data-board="problem"'):]
    board = board[: board.index("</table>")]
    assert 'data-user="alice"' in board and 'data-user="bob"' not in board
    assert "not the current one" in old
    # The baseline row of the old version's board does not name the current version's baseline.
    assert f"version {first}'s, timed in the same jobs" in board and "torch.add(a, b, out=c)" not in board
    for wrong in ("0", str(first + 2), "x", "²"):
        assert client.get(f"/problems/{NAME}/?gpu=h200&version={wrong}").status_code == 404


def test_the_api_reads_either_version(alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, NAME, "h200", 1.5)
    first = Problem.objects.get(name=NAME).version
    bump()
    ranked_now(bob, 0.8)
    api = APIClient()

    current = api.get(f"/api/leaderboards/{NAME}/h200").json()
    assert (current["version"], current["current_version"]) == (first + 1, first + 1)
    assert [row["user"] for row in current["results"]] == ["bob"]
    old = api.get(f"/api/leaderboards/{NAME}/h200?version={first}").json()
    assert (old["version"], old["count"], [row["user"] for row in old["results"]]) == (first, 1, ["alice"])
    for wrong in ("0", str(first + 2), "one", ""):  # empty is no integer either (schemathesis found it)
        for path in (f"/api/leaderboards/{NAME}/h200", f"/api/problems/{NAME}/references"):
            answer = api.get(f"{path}?version={wrong}")
            assert answer.status_code == 400
            assert (answer.json()["error"]["code"], answer.json()["error"]["field"]) == ("invalid", "version")


def test_the_home_page_leads_with_the_current_version_and_the_user_page_marks_an_old_rank(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, NAME, "h200", 1.9)
    first = Problem.objects.get(name=NAME).version
    bump()
    ranked_now(bob, 0.8)

    from leaderboard.web.pages import best_per_problem_and_gpu, best_ranks

    leaders = best_per_problem_and_gpu()
    problem, h200 = Problem.objects.get(name=NAME), GpuType.objects.get(key="h200")
    assert leaders[(problem.pk, h200.pk)].user.username == "bob"  # alice's higher v1 score is not compared
    assert [(row.problem_version, row.rank) for row in best_ranks(alice)] == [
        (first, 1)
    ]  # first of her version
    page = client.get("/users/alice/").content.decode()
    assert f"version={first}" in page and "an earlier version" in page


def test_the_migration_files_every_existing_row_under_its_submissions_version(
    alice: Any, catalogue: None
) -> None:
    evaluation = ranked(alice, NAME, "h200", 1.5)
    RankingEntry.objects.filter(evaluation=evaluation).update(problem_version=99)
    migration = importlib.import_module("leaderboard.migrations.0007_rankingentry_problem_version")
    migration.versions_from_submissions(apps, None)
    stored = set(RankingEntry.objects.filter(evaluation=evaluation).values_list("problem_version", flat=True))
    assert stored == {evaluation.submission.problem_version}


def test_an_evaluation_still_queued_for_a_retired_version_ends_at_once_with_both_versions_named(
    alice: Any, catalogue: None
) -> None:
    from leaderboard.dispatch.enqueue import hand_to_broker

    submission = create_submission(alice, NAME, "python", SOURCE, ["h200"], "ranked")
    evaluation = submission.evaluations.get()
    assert evaluation.status == "queued" and evaluation.enqueued_at is None  # not handed over yet
    current = bump().version
    assert not hand_to_broker(evaluation.pk)  # nothing sent: no runner carries the old version
    evaluation.refresh_from_db()
    assert evaluation.status == "error" and evaluation.finished_at is not None
    assert f"{NAME} v{current - 1}" in evaluation.message and f"moved to v{current}" in evaluation.message
