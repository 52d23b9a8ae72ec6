"""How many calls the witness makes of a shape, which figure it takes from them, and the witness
process's early load (before the ranked stage, never during it). Runs without a GPU: the judge's
side of the socket is real, the witness process is played by a thread speaking its frames.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evaluator.harness import channel
from evaluator.harness.witness import session as witness_session
from evaluator.harness.witness.session import WitnessFailed, await_load, begin_load, calls_for
from evaluator.harness.witness.witnesses import (
    MIN_WITNESS_CALLS,
    THIRD_CALL_BELOW_S,
    WITNESS_CALLS,
    gpu_witness,
    witnessed_time,
)
from tests.harness_helpers import timed_result


def test_cheap_calls_get_three_witnessed_calls_and_costly_ones_two() -> None:
    assert calls_for(0, 0.0) == WITNESS_CALLS == 3
    assert calls_for(1, 10.0) == WITNESS_CALLS  # never fewer than two, however long the first took
    assert calls_for(2, THIRD_CALL_BELOW_S - 0.01) == WITNESS_CALLS  # a 14-kernel call: three
    assert calls_for(2, THIRD_CALL_BELOW_S) == MIN_WITNESS_CALLS == 2  # a 600-kernel MoE call: two
    assert calls_for(3, 0.1) == 3


def _shape_calls(per_call_s: float) -> int:
    made, spent = 0, 0.0
    while made < calls_for(made, spent):
        made, spent = made + 1, spent + per_call_s
    return made


@pytest.mark.parametrize(("kernels", "expected"), [(1, 3), (14, 3), (20, 2), (108, 2), (600, 2)])
def test_the_rule_on_the_h200s_cost_of_a_call(kernels: int, expected: int) -> None:
    # ~12.4 ms per kernel ncu measures (two markers included) on the H200.
    assert _shape_calls(0.0124 * (kernels + 2)) == expected


def test_the_witness_is_the_median_of_three_and_the_lower_of_two() -> None:
    assert witnessed_time([5.0, 9.0, 6.0]) == 6.0
    assert witnessed_time([9.0, 6.0]) == 6.0  # a one-off first call (an autotune) dropped
    assert witnessed_time([7.5]) == 7.5


def test_an_honest_claim_under_a_costly_first_call_is_confirmed_with_two_calls() -> None:
    report = timed_result({"median_us": 8000.0, "gate_us": 20.0})
    # First call 30% slower (lazy set-up under ncu), second as the timing measured.
    witness = gpu_witness(report, [10400.0, 8050.0], 590, [590, 590])
    assert witness.confirmed and witness.median_us == 8050.0 and witness.n == 2
    assert witness.calls_us == [10400.0, 8050.0]  # shown in the report, checked by the site
    forged = gpu_witness(timed_result({"median_us": 3000.0, "gate_us": 20.0}), [10400.0, 8050.0], 590)
    assert not forged.confirmed and "timing not confirmed" in forged.message


# ---------------------------------------------------------------- the early load


class FakeSession:
    """The judge's side of an ncu session whose witness process is a thread on a socketpair."""

    def __init__(self, answer: dict[str, Any] | None, delay_s: float = 0.0) -> None:
        self.ncu = "ncu"
        self.judge_end, self.child_end = socket.socketpair()
        self.discarded = False
        self.configs: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._witness_process, args=(answer, delay_s), daemon=True)
        self.thread.start()

    def _witness_process(self, answer: dict[str, Any] | None, delay_s: float) -> None:
        self.configs.append(channel.read_frame(self.child_end.fileno()))
        time.sleep(delay_s)  # importing the submission
        if answer is not None:
            channel.write_all(self.child_end.fileno(), channel.encode(answer))

    def start(self, limit_s: float) -> socket.socket:
        return self.judge_end

    def discard(self) -> None:
        self.discarded = True


def _judge(session: FakeSession, compile_s: float = 5.0) -> Any:
    request = SimpleNamespace(file=Path("/tmp/submission.py"), language="python", spec=None,
                              limits=SimpleNamespace(compile_s=compile_s))
    return SimpleNamespace(witness_session=session, witness_load=None, request=request,
                           problem=SimpleNamespace(name="vector_add"),
                           outcome=SimpleNamespace(phase_seconds={}))


def test_the_witness_process_loads_while_the_test_stage_runs_and_is_done_before_the_ranked_stage() -> None:
    session = FakeSession({"type": "ready"}, delay_s=0.3)
    judge = _judge(session)
    began = time.monotonic()
    begin_load(judge)
    assert time.monotonic() - began < 0.2  # handing over the job does not wait for the load
    session.thread.join(0.1)
    assert session.configs and session.configs[0]["type"] == "config"
    assert (
        session.configs[0]["problem"] == "vector_add" and session.configs[0]["file"] == "/tmp/submission.py"
    )
    await_load(judge)  # the ranked stage starts only after this returns
    assert time.monotonic() - began >= 0.3
    assert judge.witness_load.loaded and judge.witness_load.failure is None and not session.discarded
    parts = witness_session.SubPhases(SimpleNamespace(outcome=judge.outcome))
    peer = witness_session._loaded_peer(judge, session, parts)  # the witness stage takes the loaded peer
    assert peer.fd == session.judge_end.fileno() and judge.witness_load is None


def test_a_submission_that_does_not_load_under_ncu_leaves_the_result_provisional_and_the_process_killed() -> (
    None
):
    session = FakeSession({"type": "compile_error", "message": "import failed: boom"})
    judge = _judge(session)
    begin_load(judge)
    await_load(judge)
    assert session.discarded  # nothing of the witness process runs during the ranked stage
    parts = witness_session.SubPhases(SimpleNamespace(outcome=judge.outcome))
    with pytest.raises(WitnessFailed, match="did not load under ncu: import failed: boom"):
        witness_session._loaded_peer(judge, session, parts)


def test_a_witness_process_that_never_answers_is_killed_at_the_compile_limit() -> None:
    session = FakeSession(None)
    judge = _judge(session, compile_s=0.3)
    begin_load(judge)
    began = time.monotonic()
    await_load(judge)
    assert 0.2 < time.monotonic() - began < 3.0
    assert session.discarded and "stopped answering" in (judge.witness_load.failure or "")


def test_a_job_without_a_witness_session_loads_nothing_early() -> None:
    judge = _judge(FakeSession(None))
    judge.witness_session = None
    begin_load(judge)
    await_load(judge)
    assert judge.witness_load is None
