"""Unmapping the judge's buffers in the child (evaluator/harness/shared.py, Mapped.close_all)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from evaluator.harness import shared


class FakeRuntime:
    def __init__(self) -> None:
        self.closed: list[int] = []

    def cudaIpcCloseMemHandle(self, pointer: int) -> tuple[int]:  # the CUDA runtime's name
        self.closed.append(pointer)
        return (0,)


@pytest.fixture
def runtime(monkeypatch: Any) -> FakeRuntime:
    fake = FakeRuntime()
    monkeypatch.setattr(shared, "_cudart", lambda: fake)
    return fake


def test_every_mapping_is_closed_after_the_device_is_idle(monkeypatch: Any, runtime: FakeRuntime) -> None:
    synchronized: list[bool] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synchronized.append(True))
    mapped = shared.Mapped()
    mapped._opened.extend([0x1000, 0x2000])
    mapped.close_all()
    assert synchronized == [True] and runtime.closed == [0x1000, 0x2000] and mapped._opened == []


def test_a_context_poisoned_by_a_cuda_fault_does_not_stop_the_unbind(
    monkeypatch: Any, runtime: FakeRuntime
) -> None:
    # After an illegal address every CUDA call of the process fails; the child must still answer
    # the judge's unbind, so that the job ends as RUNTIME_ERROR with the later shapes "not run".
    def poisoned(device: Any = None) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", poisoned)
    mapped = shared.Mapped()
    mapped._opened.extend([0x1000])
    mapped.close_all()
    assert runtime.closed == [] and mapped._opened == []
