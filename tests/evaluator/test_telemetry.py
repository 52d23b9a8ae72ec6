"""NVML telemetry: clock-event reasons decoded by name (unknown bits kept, not dropped), only the
reasons that slow a measurement count as throttling, and without NVML every read is None, never an
error. On a GPU host the sample is a valid ``Telemetry``."""

from __future__ import annotations

import pytest

from evaluator.harness.single.timing_service import telemetry_notes
from evaluator.harness.timing.telemetry import BENIGN, REASONS, Nvml, decode_reasons
from evaluator.report import Telemetry
from tests.harness_helpers import cuda_available


def test_reason_bits_decode_to_their_names_and_unknown_bits_are_kept() -> None:
    assert decode_reasons(0) == []
    assert decode_reasons(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert decode_reasons(0x40 | 0x10000) == ["hw_thermal_slowdown", "unknown_0x10000"]
    assert sorted(decode_reasons(sum(REASONS))) == sorted(REASONS.values())


def test_idle_and_application_clocks_are_not_throttling() -> None:
    assert set(REASONS.values()) >= BENIGN
    assert {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"}.isdisjoint(BENIGN)


def test_a_throttled_sample_or_a_collapsed_clock_becomes_a_note() -> None:
    assert telemetry_notes(None, None) == []
    assert telemetry_notes({"throttled": True}, None) == ["GPU throttled during measurement"]
    assert telemetry_notes({"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1200}) == [
        "SM clock fell from 1980 to 1200 MHz during the measurement"]


@pytest.mark.skipif(cuda_available(), reason="a GPU host has NVML: the next test reads it")
def test_without_nvml_every_read_is_none() -> None:
    nvml = Nvml("GPU-00000000-0000-0000-0000-000000000000")
    assert nvml.sample() is None and nvml.compute_processes() is None


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU")
def test_a_gpu_sample_is_a_valid_telemetry_record() -> None:
    sample = Nvml(index=0).sample()
    assert sample is not None
    telemetry = Telemetry.model_validate(sample)
    assert telemetry.sm_clock_mhz and telemetry.throttled == any(
        r not in BENIGN for r in telemetry.throttle_reasons
    )
    assert (Nvml(index=0).compute_processes() or 0) >= 0
