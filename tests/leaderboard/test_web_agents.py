"""The agent column: a submission made with an API token that names an agent shows it beside the
user on the rankings, the per-shape boards, the provisional list and the report.

The cast (tests/conftest.py): alice submits through her agent's token; bob submits by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from leaderboard.models import SubmissionOrigin
from leaderboard.web.agents import agent_label
from tests.leaderboard.web_helpers import ranked

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def by_agent(
    evaluation: Any, name: str = "kernel-agent", model: str = "some-llm", version: str = "0.3"
) -> Any:
    SubmissionOrigin.objects.create(submission=evaluation.submission, agent_name=name, agent_model=model,
                                    agent_version=version)
    return evaluation


def test_the_rankings_show_the_agent_beside_the_user(
    client: Client, alice: Any, bob: Any, catalogue: None
) -> None:
    by_agent(ranked(alice, "vector_add", "h200", 1.4))
    ranked(bob, "vector_add", "h200", 1.2)
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    board = page[page.index('data-board="problem"'):]
    board = board[: board.index("</table>")]
    alice_row = board[board.index('data-user="alice"'):]
    assert "via kernel-agent 0.3 (some-llm)" in alice_row[: alice_row.index("</tr>")]
    bob_row = board[board.index('data-user="bob"'):]
    assert "via " not in bob_row[: bob_row.index("</tr>")]
    shape_boards = page[page.index('id="per-shape"'):]
    assert shape_boards.count("via kernel-agent 0.3 (some-llm)") >= 1


def test_a_provisional_result_shows_its_agent(client: Client, alice: Any, catalogue: None) -> None:
    by_agent(ranked(alice, "vector_add", "h200", 1.4, witnessed=False), name="tuner", model="", version="")
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    provisional = page[page.index('id="provisional-table"'):]
    assert "via tuner" in provisional[: provisional.index("</table>")]


def test_the_report_names_the_agent_and_escapes_it(client: Client, alice: Any, catalogue: None) -> None:
    evaluation = by_agent(ranked(alice, "vector_add", "h200", 1.1), name="<i>agent</i>")
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    assert "via &lt;i&gt;agent&lt;/i&gt; 0.3 (some-llm)" in page and "<i>agent" not in page


def test_an_agent_label_leaves_out_what_the_token_did_not_say() -> None:
    assert agent_label("a", "m", "1") == "a 1 (m)"
    assert agent_label("", "m", "") == "m"
    assert agent_label("a", "", "") == "a"
    assert agent_label("", "", "") == ""
