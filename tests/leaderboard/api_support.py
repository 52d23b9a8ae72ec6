"""Helpers (no tests) for the API tests: token clients, a private broker, finishing evaluations.

The cast (tests/conftest.py): alice and bob submit through the API with their own tokens; alice
may read and change her submissions, bob may read alice's reports but never her source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from leaderboard.models import ApiToken, Evaluation
from leaderboard.models.tokens import AgentInfo

REPO = Path(__file__).resolve().parents[2]
VECTOR_ADD = (REPO / "examples" / "python" / "vector_add.py").read_text()


def client_for(user: Any, agent: AgentInfo | None = None, callback_url: str = "") -> APIClient:
    """An API client that authenticates as ``user`` with a fresh bearer token."""
    _token, plain = ApiToken.issue(user, name="test", agent=agent, callback_url=callback_url)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return client


def submit_body(**overrides: Any) -> dict[str, Any]:
    body = {"problem": "vector_add", "language": "python", "gpu_types": ["cpu"], "source": VECTOR_ADD,
            "mode": "test"}
    body.update(overrides)
    return body


def finish(evaluation: Evaluation, status: str, **fields: Any) -> Evaluation:
    """Drive an evaluation to a terminal status through the model's own transitions."""
    if status not in ("cancelled", "error") or fields.pop("started", False):
        evaluation.transition("running", expected=("queued",))
    assert evaluation.transition(status, **fields), f"could not move {evaluation} to {status}"
    return evaluation


@pytest.fixture
def catalogue(gpu_types: Any, problems: Any, broker: str) -> None:
    """The real GPU table and problem catalogue, and a private broker for what gets enqueued."""


@pytest.fixture
def alice_api(alice: Any, catalogue: None) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_api(bob: Any, catalogue: None) -> APIClient:
    return client_for(bob)
