"""The site recomputes every score it stores (leaderboard/dispatch/report_verdict.py, store.py).

A report is the runner's claim. These tests hand the site reports as a runner would send them:
honest ones (figures from the evaluator's own functions) are stored and ranked with the site's
figures; forged ones (a problem score of 7.5 with no shapes, a median below t_SOL, a claimed score
that is not the site's, impossible times, shapes nobody asked for) are never stored as ranked.
The cast (tests/conftest.py): alice submits; the GPU types and catalogue are the real ones.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from evaluator.report import ShapeReport
from evaluator.scoring import problem_score, ranked_time
from leaderboard import dispatch
from leaderboard.models import Evaluation, RankingEntry
from leaderboard.submissions import create_submission
from tests.leaderboard import test_dispatch_results as results
from tests.leaderboard.dispatch_reports import gpu_report, with_witness

# Shared with test_dispatch_results: a real CPU report, a broker of the test's own, alice's evaluation.
cpu_report, evaluation = results.cpu_report, results.evaluation
EXAMPLE, completed, started = results.EXAMPLE, results.completed, results.started

@pytest.fixture
def gpu_evaluation(alice: Any, gpu_types: Any, problems: Any, broker: str,
                   django_capture_on_commit_callbacks: Any) -> Evaluation:
    with django_capture_on_commit_callbacks(execute=True):
        submission = create_submission(alice, "vector_add", "python", EXAMPLE, ["h200"], "ranked")
    return submission.evaluations.get()


def deliver(evaluation: Evaluation, report: dict[str, Any], capture: Any) -> Evaluation:
    started(evaluation, runner="node-a:0")
    with capture(execute=True):
        dispatch.store_result(completed(evaluation, report, runner="node-a:0"))
    evaluation.refresh_from_db()
    return evaluation


def ranked_rows(evaluation: Evaluation) -> int:
    return RankingEntry.objects.filter(evaluation=evaluation).count()


def test_an_honest_gpu_report_is_stored_and_ranked_with_the_sites_own_figures(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    report = gpu_report(cpu_report)
    evaluation = deliver(gpu_evaluation, report, django_capture_on_commit_callbacks)
    assert evaluation.status == "passed" and evaluation.rank_eligible, evaluation.message
    assert evaluation.score == pytest.approx(report["problem_score"], rel=1e-9)
    expected = {shape["shape_id"]: shape["sol"] for shape in report["shapes"]}
    for row in evaluation.shape_results.select_related("shape"):
        assert row.t_sol_us == pytest.approx(expected[row.shape.shape_id]["t_sol_us"], rel=1e-9)
        assert row.score == pytest.approx(expected[row.shape.shape_id]["score"], rel=1e-9)
    assert ranked_rows(evaluation) >= 1


def test_a_report_claiming_7_5_with_no_shapes_is_rejected_and_never_ranked(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = {**gpu_report(cpu_report), "shapes": [], "problem_score": 7.5, "rank_eligible": True}
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and not evaluation.rank_eligible and evaluation.score is None
    assert "covers 0 of the" in evaluation.message
    assert evaluation.report["problem_score"] is None and ranked_rows(evaluation) == 0


def test_a_claimed_score_outside_zero_one_is_rejected(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = {**gpu_report(cpu_report), "problem_score": 7.5}
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "7.5, outside [0, 1]" in evaluation.message
    assert ranked_rows(evaluation) == 0


def test_a_median_below_t_sol_is_rejected_as_faster_than_light(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = gpu_report(cpu_report, kernel_over_sol=0.5)
    for shape in forged["shapes"]:  # a forger would not send the figures that give it away
        shape["sol"] = None
    forged["problem_score"] = None
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "faster than light" in evaluation.message
    assert evaluation.score is None and not evaluation.shape_results.exists() and ranked_rows(evaluation) == 0


def test_a_forged_problem_score_that_is_not_the_sites_is_rejected(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    report = gpu_report(cpu_report)
    forged = {**report, "problem_score": min(1.0, report["problem_score"] * 1.2)}
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "the site computes" in evaluation.message
    assert evaluation.score is None and ranked_rows(evaluation) == 0


def test_a_forged_shape_score_is_rejected_and_not_stored(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = gpu_report(cpu_report)
    forged["shapes"][-1]["sol"]["score"] = 0.99
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "claims score 0.99" in evaluation.message
    assert all(shape["sol"] is None for shape in evaluation.report["shapes"])


@pytest.mark.parametrize("median", [-1.0, 0.0, math.inf, math.nan])
def test_a_time_that_is_not_positive_and_finite_is_rejected(
        gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any,
        median: float) -> None:
    forged = gpu_report(cpu_report)
    forged["shapes"][0]["timing"]["median_us"] = median
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "is not a positive finite time" in evaluation.message


def test_a_report_without_its_witness_is_stored_provisional_and_never_ranked(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    claims_eligible = {**gpu_report(cpu_report, witnessed=False), "rank_eligible": True}
    evaluation = deliver(gpu_evaluation, claims_eligible, django_capture_on_commit_callbacks)
    assert evaluation.status == "passed" and evaluation.score is not None
    assert not evaluation.rank_eligible and ranked_rows(evaluation) == 0
    assert evaluation.report["rank_eligible"] is False and evaluation.report["witnessed"] is False


def test_a_witness_that_does_not_confirm_a_ranked_median_keeps_it_provisional(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    report = gpu_report(cpu_report)
    ranked = next(shape for shape in report["shapes"] if shape["ranked"])
    ranked["witness"]["floor_us"] = ranked["timing"]["median_us"] * 2  # the witness saw a slower kernel
    evaluation = deliver(gpu_evaluation, report, django_capture_on_commit_callbacks)
    assert evaluation.status == "passed" and not evaluation.rank_eligible and ranked_rows(evaluation) == 0


@pytest.mark.parametrize(("on_ranked", "report_level", "ranked"), [
    (False, False, True), (True, False, False), (False, True, False)])
def test_only_a_flag_on_a_ranked_shape_or_the_whole_report_costs_the_ranking(
        gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any,
        on_ranked: bool, report_level: bool, ranked: bool) -> None:
    report = gpu_report(cpu_report)
    shape = next(item for item in report["shapes"] if item["ranked"] == on_ranked)
    report["flags"] = (
        ["host work during the timed call"] if report_level else [f"{shape['shape_id']}: host work"]
    )
    evaluation = deliver(gpu_evaluation, report, django_capture_on_commit_callbacks)
    assert evaluation.status == "passed" and evaluation.rank_eligible is ranked
    assert (ranked_rows(evaluation) > 0) is ranked


def test_a_report_with_shapes_the_job_did_not_ask_for_is_rejected(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = gpu_report(cpu_report)
    forged["shapes"].append({**forged["shapes"][0]})  # the same shape twice
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "the job asked for" in evaluation.message


def test_the_verdict_is_the_worst_shape_status_whatever_the_report_says(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = gpu_report(cpu_report)
    failing = forged["shapes"][0]
    failing.update(status="INCORRECT_NUMERICAL", timing=None, baseline_timing=None, sol=None, witness=None)
    forged["problem_score"] = None
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "failed" and not evaluation.rank_eligible


def test_a_cpu_report_is_ranked_in_the_development_ranking_only_once_witnessed(
        evaluation: Evaluation, cpu_report: dict[str, Any],
        django_capture_on_commit_callbacks: Any) -> None:
    stored = deliver(evaluation, with_witness(cpu_report), django_capture_on_commit_callbacks)
    # Scored on the ranked times (the judge's clock where it says more than the claim), never on claims.
    ranked = [ranked_time(ShapeReport.model_validate(s)) for s in with_witness(cpu_report)["shapes"]]
    scores = [times.baseline_us / (times.baseline_us + times.kernel_us) for times in ranked if times]
    assert len(scores) == len(cpu_report["shapes"])
    assert stored.status == "passed" and stored.rank_eligible
    assert stored.score == pytest.approx(problem_score(scores))
    assert RankingEntry.objects.filter(evaluation=stored, gpu_type__key="cpu").exists()


def test_a_witness_with_a_non_finite_floor_is_rejected(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    forged = gpu_report(cpu_report)
    forged["shapes"][0]["witness"]["floor_us"] = -math.inf  # a floor nothing can undercut
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and "are not finite times" in evaluation.message


@pytest.mark.parametrize(("calls_us", "why"), [
    ([5.0, math.nan], "are not finite times"),
    ([5.0, 7.0, 9.0], "is not the median of its calls"),  # the stated median is not theirs
])
def test_a_witness_whose_calls_disagree_with_its_median_is_rejected(
        gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any,
        calls_us: list[float], why: str) -> None:
    forged = gpu_report(cpu_report)
    forged["shapes"][0]["witness"].update(median_us=5.0, calls_us=calls_us)
    evaluation = deliver(gpu_evaluation, forged, django_capture_on_commit_callbacks)
    assert evaluation.status == "rejected" and why in evaluation.message


def test_a_witness_of_two_calls_stands_at_the_lower(
    gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    report = gpu_report(cpu_report)
    for shape in report["shapes"]:
        witness = shape["witness"]
        witness["calls_us"] = [witness["median_us"] * 1.3, witness["median_us"]]  # a costly first call
    evaluation = deliver(gpu_evaluation, report, django_capture_on_commit_callbacks)
    assert evaluation.status == "passed" and evaluation.rank_eligible


def test_a_real_cpu_report_from_the_judge_is_stored_as_it_witnessed_it(
        evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any) -> None:
    stored = deliver(evaluation, cpu_report, django_capture_on_commit_callbacks)
    assert stored.status == "passed", stored.message
    assert stored.rank_eligible is cpu_report["witnessed"] is stored.report["witnessed"]


def test_a_median_below_the_t_sol_of_derived_counts_is_stored_with_its_score_capped(
        gpu_evaluation: Evaluation, cpu_report: dict[str, Any], django_capture_on_commit_callbacks: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An imported problem's derived counts are an estimate (``estimated`` in the stored counts):
    the site does not call a time below their t_SOL faster than light; the shape scores 1."""
    from evaluator.problems import get_problem

    monkeypatch.setitem(get_problem("vector_add").imported, "counts", "derived")
    for shape in gpu_evaluation.submission.problem.shapes.all():
        shape.counts = {**shape.counts, "estimated": True}
        shape.save(update_fields=["counts"])
    evaluation = deliver(gpu_evaluation, gpu_report(cpu_report, kernel_over_sol=0.5),
                         django_capture_on_commit_callbacks)
    assert evaluation.status == "passed", evaluation.message
    assert evaluation.shape_results.exists() and all(
        row.score == 1.0 for row in evaluation.shape_results.all()
    )
    assert evaluation.rank_eligible and ranked_rows(evaluation) > 0
