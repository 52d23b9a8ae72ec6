"""After a job the runner waits until NVML lists no process on the slot's GPUs before it delivers
the result (the report's ``sandbox.gpu_check``). NVML needs a GPU, so its process list is replaced
here by a scripted one; what is tested is the waiting: short pauses first (the judge that just exited
leaves NVML's list within milliseconds), a holder that stays is reported at the deadline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runners import execute, jobflow, nvml_probe
from runners.slots import Slot, StateDir
from solboard_common.protocol import gpu_queue

GPU0 = Slot(key="gpu0", device="cuda", gpu_type="h200", gpu_indices=(0,), queue=gpu_queue("h200", 1))


def _context(tmp_path: Path) -> execute.Context:
    return execute.Context(node="test", slot=GPU0, state=StateDir(tmp_path / "state"), users=None)


def _record_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(round(seconds, 3))
        real_sleep(seconds)

    monkeypatch.setattr(jobflow.time, "sleep", sleep)
    return pauses


def test_a_process_that_leaves_nvmls_list_at_once_costs_milliseconds_not_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = iter([[4242], [4242], [4242]])
    monkeypatch.setattr(nvml_probe, "processes_on", lambda indices: next(listed, []))
    pauses = _record_pauses(monkeypatch)
    assert jobflow.wait_gpus_free(_context(tmp_path)) == []
    assert pauses == [0.02, 0.04, 0.08]


def test_a_process_that_stays_is_reported_at_the_deadline_and_no_pause_runs_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nvml_probe, "processes_on", lambda indices: [4242])
    pauses = _record_pauses(monkeypatch)
    began = time.monotonic()
    assert jobflow.wait_gpus_free(_context(tmp_path), wait_s=0.5) == [4242]
    assert time.monotonic() - began >= 0.5
    assert pauses[:4] == [0.02, 0.04, 0.08, 0.16]
    assert sum(pauses) <= 0.5  # the last pause is cut to the time left (a flat second overran it)
