"""The boards' figures are the site's: a row's score is the score the site stored, its speedup and
SOL fraction the geometric mean (``evaluator.scoring``) of the per-shape figures the site stored, and
a provisional score the site did not store is the one its ``problem_score`` would give.

Results are stored through the site's own path (tests/leaderboard/web_helpers.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from evaluator.scoring import SCORE_FLOOR, geometric_mean, problem_score
from leaderboard.models import Evaluation, GpuType, Problem, ShapeResult
from leaderboard.web.boards import geomean, problem_board, provisional_rows, shape_boards
from tests.leaderboard.web_helpers import ranked

pytestmark = pytest.mark.django_db


@pytest.fixture
def board_of(problems: Any, gpu_types: Any) -> Any:
    """The real catalogue and GPU table, synced; returns the vector_add board getter for the H200."""
    return lambda: (Problem.objects.get(name="vector_add"), GpuType.objects.get(key="h200"))


def stored_shapes(evaluation: Evaluation) -> list[ShapeResult]:
    return list(ShapeResult.objects.filter(evaluation=evaluation, shape__ranked=True, shape__active=True))


def test_a_rows_score_is_the_stored_score_and_its_speedup_the_geomean_of_the_stored_ones(
        alice: Any, bob: Any, board_of: Any) -> None:
    fast, slow = ranked(alice, "vector_add", "h200", 1.4), ranked(bob, "vector_add", "h200", 0.7)
    rows = {row.user: row for row in problem_board(*board_of()).rows if row.kind == "ranked"}
    for user, evaluation in (("alice", fast), ("bob", slow)):
        shapes = stored_shapes(evaluation)
        assert rows[user].score == evaluation.score is not None
        assert rows[user].speedup == geometric_mean([shape.speedup for shape in shapes])
        assert rows[user].sol_fraction == geometric_mean([shape.sol_fraction for shape in shapes])
    assert rows["alice"].speedup == pytest.approx(1.4) and rows["bob"].speedup == pytest.approx(0.7)


def test_the_baseline_row_scores_one_half_and_sits_between_faster_and_slower(
        alice: Any, bob: Any, board_of: Any) -> None:
    ranked(alice, "vector_add", "h200", 1.4)
    ranked(bob, "vector_add", "h200", 0.7)
    board = problem_board(*board_of())
    assert [row.user or row.kind for row in board.rows] == ["alice", "baseline", "bob"]
    baseline = board.rows[1]
    assert (baseline.score, baseline.speedup) == (0.5, 1.0)
    assert baseline.sol_fraction == pytest.approx(0.5)  # web_helpers' baseline runs at 50% of SOL
    above, below = board.rows[0].score, board.rows[2].score
    assert above is not None and below is not None and board.rows[2].gap == pytest.approx(above - below)


def test_a_shape_board_shows_the_stored_median_and_ranks_by_it(alice: Any, bob: Any, board_of: Any) -> None:
    fast, slow = ranked(alice, "vector_add", "h200", 1.8), ranked(bob, "vector_add", "h200", 1.2)
    for board in shape_boards(*board_of()):
        assert board.shape is not None
        rows = [row for row in board.rows if row.kind == "ranked"]
        assert [row.user for row in rows] == ["alice", "bob"]
        for row, evaluation in zip(rows, (fast, slow), strict=True):
            stored = ShapeResult.objects.get(evaluation=evaluation, shape=board.shape)
            assert (row.median_us, row.speedup) == (stored.median_us, stored.speedup)


def test_a_provisional_row_shows_the_score_the_site_stored(alice: Any, board_of: Any) -> None:
    unconfirmed = ranked(alice, "vector_add", "h200", 1.9, witnessed=False)
    rows = provisional_rows(*board_of())
    assert [row.evaluation.pk for row in rows] == [unconfirmed.pk]
    assert rows[0].score == unconfirmed.score is not None


def test_a_provisional_score_not_stored_floors_a_shape_that_scored_zero_as_the_site_does(
        alice: Any, board_of: Any) -> None:
    # A shape that scores 0 (its kernel above a baseline already at the speed of light) lowers the
    # problem score, floored at SCORE_FLOOR: the site's number, not a missing one.
    unconfirmed = ranked(alice, "vector_add", "h200", 1.9, witnessed=False)
    Evaluation.objects.filter(pk=unconfirmed.pk).update(score=None)
    shapes = stored_shapes(unconfirmed)
    ShapeResult.objects.filter(pk=shapes[0].pk).update(score=0.0)
    scores = [0.0] + [shape.score for shape in shapes[1:]]
    score = provisional_rows(*board_of())[0].score
    assert score == problem_score(scores) and 0 < score < 1
    assert score == pytest.approx(geometric_mean([SCORE_FLOOR] + scores[1:]))


def test_a_provisional_score_needs_every_shape_of_the_score(alice: Any, board_of: Any) -> None:
    unconfirmed = ranked(alice, "vector_add", "h200", 1.9, witnessed=False)
    Evaluation.objects.filter(pk=unconfirmed.pk).update(score=None)
    ShapeResult.objects.filter(pk=stored_shapes(unconfirmed)[0].pk).update(score=None)
    assert provisional_rows(*board_of())[0].score is None


def test_a_geomean_of_figures_is_none_when_one_is_missing_or_not_positive() -> None:
    assert geomean([2.0, 8.0]) == geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, None]) is None and geomean([2.0, 0.0]) is None and geomean([]) is None
    with pytest.raises(ValueError, match="positive"):
        geometric_mean([2.0, 0.0])
