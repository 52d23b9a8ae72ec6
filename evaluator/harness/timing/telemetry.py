"""NVML telemetry around each shape: clocks, temperature, power, clock-event (throttle) reasons."""

from __future__ import annotations

from typing import Any

#: NVML clock-event reason bits (nvmlClocksEventReason*; formerly ClocksThrottleReason*).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that do not mean the measurement ran slower than it should.
BENIGN = {"gpu_idle", "applications_clocks_setting"}


def decode_reasons(mask: int) -> list[str]:
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


class Nvml:
    """One device's NVML handle; every read is best effort (None when unavailable)."""

    def __init__(self, uuid: str | None = None, index: int = 0) -> None:
        self.handle: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = self._handle(uuid, index)
        except Exception:  # no NVML: telemetry stays empty
            self.handle = None

    def _handle(self, uuid: str | None, index: int) -> Any:
        if uuid:
            try:
                return self.nvml.nvmlDeviceGetHandleByUUID(uuid)
            except Exception:  # fall back to the index
                pass
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def _read(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, fn)(self.handle, *args)
        except Exception:
            return None

    def _reasons(self) -> int | None:
        for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if hasattr(self.nvml, fn):
                value = self._read(fn)
                if value is not None:
                    return int(value)
        return None

    def compute_processes(self) -> int | None:
        """How many processes hold a CUDA context on this GPU (the driver's count, whatever PID
        namespace the caller is in), or None without NVML."""
        value = self._read("nvmlDeviceGetComputeRunningProcesses")
        return len(value) if value is not None else None

    def sample(self) -> dict[str, Any] | None:
        """A ``Telemetry`` dict, or None without NVML."""
        if self.handle is None:
            return None
        nvml = self.nvml
        power = self._read("nvmlDeviceGetPowerUsage")
        mask = self._reasons()
        reasons = decode_reasons(mask) if mask is not None else []
        return {
            "sm_clock_mhz": self._read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": self._read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            "temperature_c": self._read("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
            "power_w": power / 1000.0 if power is not None else None,
            "throttle_reasons": reasons,
            "throttled": any(reason not in BENIGN for reason in reasons),
        }
