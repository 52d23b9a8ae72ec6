"""The API, the report page, the home page and the CLI's lines tell one story about a result.

- Per shape, the API's ``score``, ``ranked`` and figures are the ones the site stored and the
  report page shows (on the CPU development device the report itself has no SOL section: the
  score is the site's development score).
- A CPU result is ranked on the CPU development board, and says so everywhere: the API
  (``rank_eligible``, ``development_device``), the report page, the home page's column.
- A queue position counts from 1 (the next to start), in the API and on the page alike.
- Every line a person reads names the submission, never an evaluation's own id.

The cast (tests/conftest.py): alice submits; her vector_add is evaluated for real by the
evaluator on the CPU, the result stored through the site's own path as a runner's would be.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard import dispatch
from leaderboard.models import Evaluation, ShapeResult, Submission
from leaderboard.ranking_maintenance import refresh_rankings_for
from solboard_client.render import evaluation_line
from solboard_common.protocol import JobResult, JobStarted
from tests.leaderboard.api_support import catalogue, client_for, submit_body
from tests.leaderboard.dispatch_reports import with_witness
from tests.leaderboard.test_dispatch_results import cpu_report  # a real ranked CPU report of the example

__all__ = ["catalogue", "cpu_report"]  # fixtures used by name
pytestmark = pytest.mark.django_db
RUNNER = "node-a:cpu"


@pytest.fixture
def stored(alice: Any, catalogue: None, cpu_report: dict[str, Any]) -> Evaluation:
    """alice's ranked CPU submission, its result stored as a runner's would be; a first submission
    on two GPU types keeps the submission and evaluation ids apart."""
    api = client_for(alice)
    api.post("/api/submissions", submit_body(gpu_types=["cpu", "h100"]), format="json")
    created = api.post("/api/submissions", submit_body(mode="ranked"), format="json").json()
    evaluation = Evaluation.objects.get(submission_id=created["id"])
    assert evaluation.pk != evaluation.submission_id
    dispatch.record_started(
        JobStarted(
            job_id=str(evaluation.job_id),
            evaluation_id=evaluation.pk,
            runner=RUNNER,
            started_at=timezone.now().isoformat(),
        )
    )
    outcome = dispatch.store_result(
        JobResult(
            job_id=str(evaluation.job_id),
            evaluation_id=evaluation.pk,
            runner=RUNNER,
            outcome="completed",
            report=with_witness(cpu_report),
        )
    )
    assert outcome.startswith("stored"), outcome
    refresh_rankings_for(evaluation)
    evaluation.refresh_from_db()
    return evaluation


def page_scores(html: str, evaluation: Evaluation) -> dict[str, str]:
    """Shape id -> the 'Score S' cell of the report page's shape table."""
    section = html[html.index(f'id="evaluation-{evaluation.pk}"'):]
    scores = {}
    for shape_id, row in re.findall(r'<tr data-shape="([^"]+)">(.*?)</tr>', section, re.DOTALL):
        cells = re.findall(r'<td class="num">(.*?)</td>', row, re.DOTALL)
        scores.setdefault(shape_id, re.sub(r"<[^>]+>", "", cells[5]).strip())
    return scores


def test_per_shape_scores_and_ranked_in_the_api_are_the_report_pages(
    stored: Evaluation, client: Client
) -> None:
    body = client_for(stored.submission.user).get(f"/api/submissions/{stored.submission_id}").json()
    [evaluation] = body["evaluations"]
    rows = {
        row.shape.shape_id: row
        for row in ShapeResult.objects.filter(evaluation=stored).select_related("shape")
    }
    page = page_scores(client.get(f"/submissions/{stored.submission_id}/").content.decode(), stored)
    assert evaluation["shapes"] and len(evaluation["shapes"]) == len(rows)
    for shape in evaluation["shapes"]:
        row = rows[shape["shape_id"]]
        assert shape["score"] is not None and shape["score"] == row.score
        assert shape["ranked"] is row.shape.cpu  # counts on this device: the cpu shapes
        assert page[shape["shape_id"]] == f"{row.score:.4f}"
        assert shape["median_us"] == row.median_us and shape["baseline_median_us"] == row.baseline_median_us


def test_a_cpu_result_is_ranked_on_the_development_board_in_every_place(
    stored: Evaluation, client: Client
) -> None:
    body = Client().get(f"/api/submissions/{stored.submission_id}").json()
    [evaluation] = body["evaluations"]
    assert evaluation["rank_eligible"] and evaluation["not_ranked_reason"] is None
    assert evaluation["development_device"] is True
    report = client.get(f"/submissions/{stored.submission_id}/").content.decode()
    assert "Ranked on the CPU development board" in report and "never compared with GPU results" in report
    home = client.get("/").content.decode()
    assert "Best on cpu<br><small" in home and "development board" in home
    assert "never ranked" not in home
    assert "(CPU development board)" in evaluation_line(evaluation)


def test_the_queue_position_counts_from_one_in_the_api_and_on_the_page(alice: Any, catalogue: None,
                                                                         client: Client) -> None:
    api = client_for(alice)
    first = api.post("/api/submissions", submit_body(), format="json").json()
    second = api.post("/api/submissions", submit_body(), format="json").json()
    assert [first["evaluations"][0]["queue_position"], second["evaluations"][0]["queue_position"]] == [1, 2]
    page = client.get(f"/submissions/{second['id']}/").content.decode()
    assert "position 2 in the cpu queue" in page
    assert "(position 2 in the cpu queue)" in evaluation_line(second["evaluations"][0])


def test_people_see_submission_ids_never_an_evaluations_own(alice: Any, catalogue: None) -> None:
    api = client_for(alice)
    api.post("/api/submissions", submit_body(gpu_types=["cpu", "h100"]), format="json")
    body = api.post("/api/submissions", submit_body(gpu_types=["cpu", "h100"]), format="json").json()
    ids = {evaluation["id"] for evaluation in body["evaluations"]}
    assert body["id"] not in ids  # the two id spaces differ here, so a mix-up would show
    for evaluation in body["evaluations"]:
        line = evaluation_line(evaluation)
        assert line.startswith(f"submission {body['id']}, {evaluation['gpu_type']} test run 1: queued")
        assert f"#{evaluation['id']}" not in line and str(evaluation["id"]) not in line.split(":")[0]
        assert evaluation["submission_id"] == body["id"]
    assert Submission.objects.filter(pk=body["id"]).exists()
