"""The problem page's "Reference lines" section: each line of this GPU type with its status, score,
speedup and how the leading ranked result compares with it ("the leader is 7% slower than
Liger-Kernel"), so that a score reads against kernels people know, not only against the baseline."""

from __future__ import annotations

from dataclasses import dataclass

from leaderboard.models import GpuType, Problem
from leaderboard.ranking_maintenance import ranking_rows
from leaderboard.reference_lines import LineRow, time_ratio
from leaderboard.web.boards import board_shapes, shape_figures


@dataclass(frozen=True)
class SectionLine:
    line: LineRow
    #: Geometric mean over shared shapes of the leader's time / this line's (None: nothing to compare).
    leader_ratio: float | None

    @property
    def versus_leader(self) -> str:
        ratio = self.leader_ratio
        if ratio is None:
            return ""
        if abs(ratio - 1.0) < 0.005:
            return "the leader is as fast"
        return (
            f"the leader is {ratio - 1:.0%} slower"
            if ratio > 1
            else f"the leader is {1 / ratio - 1:.0%} faster"
        )


def reference_section(problem: Problem, gpu: GpuType, lines: list[LineRow],
                      version: int | None = None) -> list[SectionLine]:
    """``lines``: ``line_rows`` of this problem version and GPU type (scored on the board's shapes)."""
    if not lines:
        return []
    shapes = board_shapes(problem, gpu, version)
    leaders = ranking_rows(problem, gpu, None, 1, False, version)
    leader: dict[int, float] = {}
    if leaders:
        figures = shape_figures([leaders[0].evaluation_id]).get(leaders[0].evaluation_id, [])
        wanted = {shape.pk for shape in shapes}
        leader = {
            item.shape_id: item.median_us for item in figures if item.median_us and item.shape_id in wanted
        }
    return [
        SectionLine(line, time_ratio(leader, line) if line.status == "measured" else None) for line in lines
    ]
