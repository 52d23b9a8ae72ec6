"""The CPU development device times the baseline the way it times the kernel, and ranks times the
judge measured itself (issue 35 item 1, issue 33 item 6). Through the real CLI."""

from __future__ import annotations

from evaluator.report import ShapeReport
from evaluator.scoring import ranked_time, shape_score
from tests.harness_helpers import CHEATS, REPO, evaluate_file

RANKED = ("--device", "cpu", "--mode", "ranked", "--secret-seed-stdin")


def test_the_baseline_is_timed_in_the_child_on_the_judges_buffers_like_the_kernel() -> None:
    """The example is the baseline byte for byte: timed in the judge on its own fresh memory, the
    baseline read 3.3-6.0 us where the example read 8.5-11.3 us (scores 0.31-0.43)."""
    report = evaluate_file("vector_add", REPO / "examples/python/vector_add.py", *RANKED, stdin="424242\n")
    assert report["status"] == "PASSED", report["message"]
    for shape in report["shapes"]:
        witness = shape["witness"]
        # The judge clocked the baseline's calls in the child, and measured its own overhead there.
        assert witness["baseline_us"] is not None and witness["overhead_us"] is not None
        # Same calls on the same buffers, clocked from outside: the calls plus the judge's overhead,
        # never far under the child's own median (on a loaded CPU either may read a little higher
        # where the overhead is small beside the call, so no strict ordering is asserted).
        assert witness["baseline_us"] > 0.8 * shape["baseline_timing"]["median_us"]
        times = ranked_time(ShapeReport.model_validate(shape))
        assert times is not None and shape["ranked_time"] == times.model_dump(mode="json")


def test_a_forged_timing_is_ranked_on_the_judges_clock_not_on_its_claim() -> None:
    report = evaluate_file("vector_add", CHEATS / "c16_patch_json_encoder_fast.py", *RANKED, stdin="424242\n")
    assert report["status"] == "PASSED", report["message"]  # the CPU witness's floor is below zero here
    for shape in report["shapes"]:
        assert shape["timing"]["median_us"] == 0.002
        times = shape["ranked_time"]
        assert times["raised"] and times["kernel_us"] > 200.0  # ~0.3 ms of work per call
        score = shape_score(times["kernel_us"] * 1e-6, times["baseline_us"] * 1e-6, 0.0)
        # ~0.3 ms of work against a baseline of ~0.1 ms: below the baseline's 0.5 on the judge's clock,
        # whatever the machine's load does to both; on its claims: 1.0.
        assert score < 0.4, score
