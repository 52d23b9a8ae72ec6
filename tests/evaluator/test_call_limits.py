"""A call that never returns ends in seconds, named with its limit (issue 33, item 4): the judge's
per-call limit from the baseline's time on the same shape, a first-call allowance for compilation,
and shorter stage limits in test mode. Through the real CLI on the CPU development device."""

from __future__ import annotations

import socket
import time

import pytest

from evaluator.harness.call_limits import FIRST_CALL_S, STEADY_FLOOR_S, CallLimit, call_limit
from tests.harness_helpers import GOOD, evaluate_file

CPU = ("--device", "cpu")


def test_a_steady_call_gets_a_hundred_times_the_baseline_and_a_first_call_its_compile_allowance() -> None:
    assert call_limit(2000.0, first=False).seconds == pytest.approx(STEADY_FLOOR_S + 0.2)
    assert "100 x the baseline's median (2000.0 us)" in call_limit(2000.0, first=False).rule
    assert call_limit(2000.0, first=True).seconds == FIRST_CALL_S["cuda"] == 15.0
    assert call_limit(2000.0, first=True, device="cpu").seconds == FIRST_CALL_S["cpu"]
    assert call_limit(2000.0, first=True, device="cpu", first_call_s=10.0).seconds == 10.0
    assert call_limit(None, first=False).seconds == STEADY_FLOOR_S
    # A baseline so slow that 100x of it exceeds the allowance keeps its own budget on a first call.
    assert call_limit(1e6, first=True).seconds == pytest.approx(STEADY_FLOOR_S + 100.0)


def test_a_kernel_that_never_returns_ends_a_test_mode_job_at_its_first_calls_limit() -> None:
    """``while True: pass`` from the first call, default test-mode limits (the job held its runner
    for 301.8 s before). On a GPU the allowance is 15 s: under 30 s from a fresh process
    (benchmarks/harness_h200.sh limits)."""
    started = time.monotonic()
    # The CPU device allows 90 s (torch.compile's gcc on a shared machine): the test asks for 10.
    report = evaluate_file("vector_add", GOOD / "hangs.py", *CPU, "--time-limit-first-call", "10")
    assert time.monotonic() - started < 25
    assert report["status"] == "TIMEOUT"
    assert "test trial" in report["message"] and "limit of 10 s" in report["message"]
    assert "may compile and autotune" in report["message"]


def test_a_correctness_call_that_hangs_after_the_first_is_ended_at_its_steady_limit() -> None:
    started = time.monotonic()
    report = evaluate_file("vector_add", GOOD / "hangs_after_first_call.py", *CPU)
    assert time.monotonic() - started < 15
    assert report["status"] == "TIMEOUT"
    assert "100 x the baseline's median" in report["message"] and "shape n4099" in report["message"]


def test_a_timed_call_that_hangs_is_ended_with_the_call_named() -> None:
    started = time.monotonic()
    report = evaluate_file("vector_add", GOOD / "hangs_when_timed.py", *CPU)
    assert time.monotonic() - started < 25
    assert report["status"] == "TIMEOUT"
    assert "timed call" in report["message"] and "ran past its limit" in report["message"]
    statuses = {shape["shape_id"]: shape["status"] for shape in report["shapes"]}
    assert "TIMEOUT" in statuses.values()


def test_a_witnessed_call_that_never_answers_ends_the_witness_at_its_own_limit() -> None:
    from evaluator.harness.witness.session import Peer, WitnessFailed

    ours, theirs = socket.socketpair()
    peer = Peer(ours, time.monotonic() + 600)
    started = time.monotonic()
    with pytest.raises(WitnessFailed, match="a call under the witness ran past its limit of 0.3 s"):
        peer.call(CallLimit(0.3, "a test"))
    assert time.monotonic() - started < 5
    assert peer.deadline > time.monotonic() + 500  # the session's own deadline is back
    theirs.close()
    ours.close()
