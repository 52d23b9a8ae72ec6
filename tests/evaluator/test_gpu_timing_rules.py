"""The single-GPU timing's decision rules, on numbers (the GPU path itself: test_harness_gpu.py)."""

from __future__ import annotations

from evaluator.harness.gpu_timing import GATE_MAX_US, _ranked, gate_for, longer_gate

SPANS = [4.25] * 40  # an honest Triton vector add on the H200 (round 7)


def test_events_close_to_the_span_rank_the_span_and_need_no_second_gate() -> None:
    source, ranked, _ = _ranked(SPANS, [11.5] * 40, cupti=True, allowance_us=6.0)
    assert source == "device_span" and ranked == SPANS
    assert longer_gate(source, True, gate_for(43.0)) is None


def test_events_far_above_the_span_are_measured_again_behind_the_longest_gate_first() -> None:
    source, _, extra = _ranked(SPANS, [70.0] * 40, cupti=True, allowance_us=6.0)
    assert source == "events" and extra["event_median_us"] == 70.0
    assert longer_gate(source, True, gate_for(43.0)) == GATE_MAX_US


def test_no_second_gate_once_the_gate_is_the_longest_or_without_cupti() -> None:
    assert longer_gate("events", True, GATE_MAX_US) is None
    # Without CUPTI the events are the ranked figure, not a cross-check: nothing to retry.
    source, _, _ = _ranked([], [70.0] * 40, cupti=False, allowance_us=6.0)
    assert longer_gate(source, False, 100.0) is None
