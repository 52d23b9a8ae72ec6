"""``measure_references`` through real processes: the command submits vector_add's reference lines,
a real CPU runner node measures them like any submission (the eager baseline, and the baseline
under torch.compile, compiled inside the sandboxed child), the site worker stores them, and they
come back labelled on the API with the torch version they ran with, never in the ranking.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from leaderboard.models import REFERENCE_USER, RankingEntry, ReferenceLine
from tests.integration.cluster import Cluster, running_cluster, wait_for

pytestmark = pytest.mark.integration
#: torch.compile's first calls compile (about 10 s a graph on two cores): a test stage of minutes.
ENV = {
    "SOLBOARD_SWEEP_SECONDS": "1",
    "SOLBOARD_HEARTBEAT_SECONDS": "1",
    "SOLBOARD_JOB_COMPILE_SECONDS": "120",
    "SOLBOARD_JOB_TEST_SECONDS": "300",
    "SOLBOARD_JOB_RANKED_SECONDS": "300",
}
SETTINGS = {
    "SOLBOARD_SWEEP_SECONDS": 1,
    "SOLBOARD_JOB_COMPILE_SECONDS": 120,
    "SOLBOARD_JOB_TEST_SECONDS": 300,
    "SOLBOARD_JOB_RANKED_SECONDS": 300,
}


@pytest.fixture(scope="module")
def cluster(django_db_blocker: Any) -> Iterator[Cluster]:
    with running_cluster(django_db_blocker, ENV, SETTINGS, redis_db=12) as running:
        running.runner(f"refs{os.getpid()}")
        yield running


def test_the_cpu_runner_measures_the_eager_and_compiled_lines_which_never_rank(cluster: Cluster) -> None:
    out = StringIO()
    call_command("measure_references", "--gpu", "cpu", "--problem", "vector_add", stdout=out)
    assert "2 line(s) submitted" in out.getvalue()
    lines = {
        line.label: line
        for line in ReferenceLine.objects.filter(problem__name="vector_add", gpu_type__key="cpu")
    }
    assert set(lines) == {"eager", "torch_compile"}
    for line in lines.values():
        assert line.evaluation is not None
        finished = wait_for(line.evaluation, lambda e: e.is_terminal, timeout=420)
        assert finished.status == "passed", finished.message
        assert "solboard-reference: torch" in finished.log and finished.score is not None
    time.sleep(2)  # the site worker refreshes rankings right after each result commits
    assert not RankingEntry.objects.filter(user__username=REFERENCE_USER).exists()
    body = APIClient().get("/api/leaderboards/vector_add/cpu").json()
    assert body["results"] == []
    by_label = {line["label"]: line for line in body["references"]}
    assert set(by_label) == {"eager", "torch_compile"}
    for line in by_label.values():
        assert line["status"] == "measured" and line["ranked"] is False and line["versions"]["torch"]
        assert len(line["shapes"]) == 2 and all(item["median_us"] > 0 for item in line["shapes"])
    again = StringIO()
    call_command("measure_references", "--gpu", "cpu", "--problem", "vector_add", stdout=again)
    assert "nothing submitted" in again.getvalue() and again.getvalue().count("unchanged (measured)") == 2
