"""Operator withdrawals: the admin action asks for a note, takes the result out of every ranking
(the owner's other results take its place), and the integrity log and the report say who-when-why;
the owner's re-run is the appeal.

The cast (tests/conftest.py): alice and bob submit; the operator is staff.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from leaderboard.models import RankingEntry, Withdrawal
from leaderboard.withdrawals import WithdrawalRefused, withdraw
from tests.leaderboard.web_helpers import ranked

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def board_users(client: Client) -> list[str]:
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    table = page[page.index('data-board="problem"'):]
    return re.findall(r'data-row="ranked" data-user="(\w+)"', table[: table.index("</table>")])


def test_the_admin_action_asks_for_a_note_before_withdrawing(client: Client, operator: Any, alice: Any,
                                                            catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.4)
    client.force_login(operator)
    url = "/admin/leaderboard/evaluation/"
    asked = client.post(url, {"action": "withdraw_from_rankings", "_selected_action": [evaluation.pk]})
    assert asked.status_code == 200 and b'name="note"' in asked.content
    empty = client.post(url, {"action": "withdraw_from_rankings", "_selected_action": [evaluation.pk],
                              "apply": "1", "note": "  "})
    assert b"A note is required." in empty.content and not Withdrawal.objects.exists()
    done = client.post(url, {"action": "withdraw_from_rankings", "_selected_action": [evaluation.pk],
                             "apply": "1", "note": "timed a cached result (class 5)"})
    assert done.status_code == 302
    withdrawal = Withdrawal.objects.get(evaluation=evaluation)
    assert (withdrawal.operator_name, withdrawal.note) == ("operator", "timed a cached result (class 5)")
    assert withdrawal.withdrawn_by == operator


def test_a_withdrawn_result_leaves_every_ranking_and_the_owners_next_best_takes_its_place(
        client: Client, operator: Any, alice: Any, bob: Any, catalogue: None) -> None:
    older = ranked(alice, "vector_add", "h200", 1.1)
    best = ranked(alice, "vector_add", "h200", 1.6)
    ranked(bob, "vector_add", "h200", 1.3)
    assert board_users(client) == ["alice", "bob"]
    withdraw(best.pk, operator, "kernel reads the reference output")
    assert board_users(client) == ["bob", "alice"]
    rows = RankingEntry.objects.filter(user=alice)
    assert rows.exists() and set(rows.values_list("evaluation_id", flat=True)) == {older.pk}
    best.refresh_from_db()
    assert not best.rank_eligible


def test_a_user_whose_only_result_is_withdrawn_is_off_the_board_and_not_provisional(
        client: Client, operator: Any, alice: Any, bob: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.5)
    ranked(bob, "vector_add", "h200", 1.0)
    withdraw(evaluation.pk, operator, "suspected replay")
    assert board_users(client) == ["bob"]
    assert not RankingEntry.objects.filter(user=alice).exists()
    assert 'id="provisional-table"' not in client.get("/problems/vector_add/?gpu=h200").content.decode()


def test_the_integrity_log_and_the_report_say_it_was_withdrawn_when_and_why(
        client: Client, operator: Any, alice: Any, bob: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.5)
    withdraw(evaluation.pk, operator, "<b>reads freed memory</b>")
    log = client.get("/integrity/").content.decode()
    row = log[log.index(f'data-evaluation="{evaluation.pk}"'):]
    row = row[: row.index("</tr>")]
    assert 'data-outcome="withdrawn"' in row and "&lt;b&gt;reads freed memory&lt;/b&gt;" in row
    client.force_login(bob)
    report = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    assert "withdrawn from the rankings by an operator on" in report and "appeal with a re-run" in report
    assert "data-withdrawn-by" not in report  # the operator's name: staff only
    client.force_login(operator)
    assert (
        "Withdrawn by operator." in client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    )


def test_only_a_passed_ranked_result_can_be_withdrawn_once_and_with_a_note(
        operator: Any, alice: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.2)
    with pytest.raises(WithdrawalRefused, match="a note is required"):
        withdraw(evaluation.pk, operator, " ")
    with pytest.raises(WithdrawalRefused, match="at most 2000"):
        withdraw(evaluation.pk, operator, "x" * 2001)
    withdraw(evaluation.pk, operator, "first")
    with pytest.raises(WithdrawalRefused, match="already withdrawn"):
        withdraw(evaluation.pk, operator, "second")
    queued = type(evaluation).objects.create(submission=evaluation.submission, gpu_type=evaluation.gpu_type,
                                             mode="ranked", run_number=2)
    with pytest.raises(WithdrawalRefused, match="ended queued: only a passed ranked result"):
        withdraw(queued.pk, operator, "too early")


def test_the_owners_re_run_is_the_appeal_and_ranks_again_when_it_passes(
        client: Client, operator: Any, alice: Any, catalogue: None, settings: Any, tmp_path: Any,
        monkeypatch: Any) -> None:
    from tests.leaderboard.web_helpers import evaluate, gpu_report

    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    monkeypatch.setenv("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)
    evaluation = ranked(alice, "vector_add", "h200", 1.4)
    withdraw(evaluation.pk, operator, "needs a second look")
    client.force_login(alice)
    client.post(f"/submissions/{evaluation.submission_id}/rerun")
    appeal = evaluation.submission.evaluations.get(run_number=2)
    evaluate(appeal, gpu_report("vector_add", "h200", 1.4))
    assert board_users(client) == ["alice"]
    assert RankingEntry.objects.get(user=alice, shape__isnull=True, track="all").evaluation_id == appeal.pk


def test_the_api_says_a_withdrawn_result_is_not_ranked_and_why(
    operator: Any, alice: Any, catalogue: None
) -> None:
    from leaderboard.api.presenters import not_ranked_reason

    evaluation = ranked(alice, "vector_add", "h200", 1.5)
    assert not_ranked_reason(evaluation) is None
    withdraw(evaluation.pk, operator, "suspected replay")
    evaluation.refresh_from_db()
    reason = not_ranked_reason(evaluation)
    assert (
        reason is not None and "withdrawn" in reason and "suspected replay" in reason and "re-run" in reason
    )
