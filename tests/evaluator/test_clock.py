"""evaluator/harness/clock.py: a start-up split into parts, each the time since the mark before."""

from __future__ import annotations

import time

from evaluator.harness.clock import PartClock


def test_each_part_is_the_time_since_the_previous_mark() -> None:
    clock = PartClock()
    time.sleep(0.05)
    clock.mark("imports")
    clock.mark("context")
    time.sleep(0.02)
    clock.mark("pool")
    assert list(clock.parts) == ["imports", "context", "pool"]
    assert clock.parts["imports"] >= 0.05 and clock.parts["pool"] >= 0.02
    assert clock.parts["context"] < 0.02  # nothing happened between those two marks


def test_a_part_marked_twice_keeps_its_latest_time() -> None:
    clock = PartClock()
    clock.mark("warm")
    time.sleep(0.03)
    clock.mark("warm")
    assert list(clock.parts) == ["warm"] and clock.parts["warm"] >= 0.03
