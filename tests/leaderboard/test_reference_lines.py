"""Reference lines (issue 37 item 6): the eager baseline, torch.compile and library kernels, submitted
by ``measure_references`` through the normal path, stored with labels, shown on the problem page,
the API and the CLI beside the rankings, and never ranked.

Reports are real: the eager line's own source run by the CPU evaluator, stored by the function the
site worker runs (``dispatch.store_result``). tests/integration/test_reference_lines_runner.py runs
the command through a real CPU runner node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from evaluator.problems import get_problem
from evaluator.references import reference_specs
from leaderboard.models import REFERENCE_USER, Evaluation, RankingEntry, ReferenceLine
from leaderboard.reference_lines import LineRow, LineShape, line_status, time_ratio
from leaderboard.submissions import create_submission
from leaderboard.web.boards import problem_board, shape_boards
from leaderboard.web.reference_section import SectionLine
from solboard_client import render
from solboard_common.protocol import gpu_queue
from tests.leaderboard import test_dispatch_results as results
from tests.leaderboard.test_dispatch_store import deliver
from tests.runner_helpers import messages_on

REPO = Path(__file__).resolve().parents[2]
cpu_report = results.cpu_report  # a real ranked CPU report of the vector_add example


@pytest.fixture(scope="module")
def eager_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real ranked CPU report of vector_add's `eager` reference line, as a runner sends it."""
    folder = tmp_path_factory.mktemp("eager")
    source = folder / "eager.py"
    source.write_text(reference_specs(get_problem("vector_add"))[0].source)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "run",
            "vector_add",
            str(source),
            "--device",
            "cpu",
            "--mode",
            "ranked",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=180,
    )
    return json.loads(out.stdout)


@pytest.fixture
def site(gpu_types: Any, problems: Any, broker: str, django_capture_on_commit_callbacks: Any) -> Any:
    return lambda: django_capture_on_commit_callbacks(execute=True)


def measure(site: Any, *args: str) -> str:
    out = StringIO()
    with site():
        call_command("measure_references", *args, stdout=out)
    return out.getvalue()


def test_each_line_is_submitted_once_per_problem_version_and_a_gpu_only_one_is_not(
    site: Any, broker: str
) -> None:
    text = measure(site, "--gpu", "cpu", "--problem", "cross_entropy")
    lines = {line.label: line for line in ReferenceLine.objects.filter(problem__name="cross_entropy")}
    assert set(lines) == {"eager", "torch_compile", "liger"}
    for label in ("eager", "torch_compile"):
        submission = lines[label].submission
        assert submission is not None and submission.user.username == REFERENCE_USER and submission.public
        assert submission.language == "python" and "get_problem('cross_entropy')" in submission.source
        assert (
            lines[label].evaluation.mode == "ranked" and lines[label].source_path == "evaluator/references.py"
        )
    assert lines["liger"].submission is None and line_status(lines["liger"])[0] == "needs_gpu"
    assert lines["liger"].source_path == "evaluator/problems/cross_entropy/references/liger.py"
    assert "liger          needs a GPU runner" in text and "2 line(s) submitted" in text
    assert len(messages_on(broker, gpu_queue("cpu"))) == 2
    again = measure(site, "--gpu", "cpu", "--problem", "cross_entropy")
    assert "nothing submitted" in again and again.count("unchanged") == 3
    assert Evaluation.objects.count() == 2


def test_a_measured_line_is_never_ranked_and_shows_labelled_beside_the_ranking(
        site: Any, alice: Any, eager_report: dict[str, Any], cpu_report: dict[str, Any]) -> None:
    measure(site, "--gpu", "cpu", "--problem", "vector_add", "--label", "eager")
    line = ReferenceLine.objects.get(problem__name="vector_add", label="eager")
    assert line.evaluation is not None
    stored = deliver(line.evaluation, eager_report, lambda execute: site())
    assert stored.status == "passed" and stored.rank_eligible and stored.score is not None  # eligible, yet:
    assert not RankingEntry.objects.filter(user__username=REFERENCE_USER).exists()
    with site():
        mine = create_submission(
            alice, "vector_add", "python", results.EXAMPLE, ["cpu"], "ranked"
        ).evaluations.get()
    deliver(mine, cpu_report, lambda execute: site())
    assert RankingEntry.objects.filter(user=alice, shape=None, track="all").count() == 1

    problem, gpu = line.problem, line.gpu_type
    rows = problem_board(problem, gpu).rows
    assert [row.rank for row in rows if row.kind == "ranked"] == [1]
    [reference] = [row for row in rows if row.kind == "reference"]
    assert (
        reference.label == "eager"
        and reference.rank is None
        and reference.score == pytest.approx(stored.score)
    )
    for board in shape_boards(problem, gpu):
        assert [row.label for row in board.rows if row.kind == "reference"] == ["eager"]

    board = APIClient().get("/api/leaderboards/vector_add/cpu").json()
    assert [row["user"] for row in board["results"]] == ["alice"]
    [body] = board["references"]
    assert body["label"] == "eager" and body["status"] == "measured" and body["ranked"] is False
    assert body["versions"]["torch"] and body["score"] == pytest.approx(stored.score)
    assert {item["shape"] for item in body["shapes"]} == {"n4099", "n65537"}
    one_shape = APIClient().get("/api/leaderboards/vector_add/cpu?shape=n4099").json()["references"][0]
    assert [item["shape"] for item in one_shape["shapes"]] == ["n4099"]
    every_gpu = APIClient().get("/api/problems/vector_add/references").json()
    assert [item["label"] for item in every_gpu["gpu_types"]["cpu"]] == ["eager"] and every_gpu["gpu_types"][
        "h200"
    ] == []

    page = APIClient().get("/problems/vector_add/?gpu=cpu").content.decode()
    assert 'data-row="reference" data-label="eager"' in page and 'id="reference-lines"' in page
    assert 'data-label="eager" data-status="measured"' in page and "the leader is" in page
    assert 'data-user="solboard-references"' not in page  # not a ranked row, nor a provisional one

    out = StringIO()
    render.boards([board], out, references=True)
    assert "reference lines (measured like submissions, never ranked):" in out.getvalue()
    assert "eager" in out.getvalue() and "torch " in out.getvalue()


def test_a_line_whose_library_is_missing_on_the_runner_is_unavailable_and_can_be_tried_again(
        site: Any, broker: str) -> None:
    measure(site, "--gpu", "h200", "--problem", "cross_entropy", "--label", "liger")
    line = ReferenceLine.objects.get(problem__name="cross_entropy", label="liger")
    assert line.evaluation is not None and line.evaluation.gpu_type.key == "h200"
    Evaluation.objects.filter(pk=line.evaluation_id).update(
        status="error", evaluator_status="COMPILE_ERROR",
        message="import failed: ModuleNotFoundError: No module named 'liger_kernel'")
    line.refresh_from_db()
    status, text = line_status(line)
    assert status == "unavailable" and "liger-kernel is not installed on the runner" in text
    assert "unchanged (liger-kernel is not installed" in measure(
        site, "--gpu", "h200", "--problem", "cross_entropy", "--label", "liger"
    )
    assert "submitted" in measure(
        site, "--gpu", "h200", "--problem", "cross_entropy", "--label", "liger", "--again"
    )
    line.refresh_from_db()
    assert line_status(line)[0] == "measuring" and ReferenceLine.objects.count() == 1


def test_the_leader_is_compared_with_each_line_by_its_times_on_the_shapes_both_measured() -> None:
    shapes = [LineShape(1, "a", 10.0, 2.0, 0.4, 0.7), LineShape(2, "b", 20.0, 1.5, 0.3, 0.6),
              LineShape(3, "c", 5.0, 1.0, 0.2, 0.5)]
    line = LineRow("liger", "Liger", "library", "measured", "measured", "liger-kernel", {}, "", "x.py", 1, 1,
                   shapes=shapes)
    ratio = time_ratio({1: 10.7, 2: 21.4}, line)  # shape 3: the leader has no time there
    assert ratio == pytest.approx(1.07)
    assert SectionLine(line, ratio).versus_leader == "the leader is 7% slower"
    assert SectionLine(line, 0.8).versus_leader == "the leader is 25% faster"
    assert SectionLine(line, 1.001).versus_leader == "the leader is as fast"
    assert SectionLine(line, None).versus_leader == "" and time_ratio({}, line) is None


def test_an_account_someone_signed_up_with_that_name_is_not_used_for_the_lines(
    site: Any, django_user_model: Any
) -> None:
    django_user_model.objects.create_user(username=REFERENCE_USER, password="a password of theirs")
    with pytest.raises(CommandError, match="exists and can log in"):
        measure(site, "--gpu", "cpu", "--problem", "vector_add")
    assert not ReferenceLine.objects.exists() and not Evaluation.objects.exists()
