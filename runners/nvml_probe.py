"""GPU discovery and GPU-occupancy checks through NVML (nvidia-ml-py). No torch, no CUDA context.

NVML is optional: without the library, a driver or a GPU, discovery returns nothing and the node
serves the CPU development device.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from solboard_common.protocol import GpuInfo

log = logging.getLogger(__name__)


class NvmlUnavailable(RuntimeError):
    pass


#: Memory NVML counts as used on an idle GPU (the driver's own reservations), not any process's.
DRIVER_RESERVED_BYTES = 1 << 30


@contextmanager
def nvml() -> Iterator[Any]:
    try:
        import pynvml
    except ImportError as error:
        raise NvmlUnavailable(f"nvidia-ml-py is not installed: {error}") from error
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML did not initialise: {error}") from error
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_type_for(name: str) -> str:
    """Catalogue key (h100, h200, b200) or ``unknown:<name>``: the evaluator's table decides."""
    from evaluator.gpu_specs import gpu_type_for_name

    return gpu_type_for_name(name)


def discover(only: list[int] | None = None) -> list[GpuInfo]:
    """Every GPU NVML sees (or those in ``only``), with its catalogue type; [] without NVML."""
    try:
        with nvml() as lib:
            driver = _text(lib.nvmlSystemGetDriverVersion())
            found = []
            for index in range(lib.nvmlDeviceGetCount()):
                if only is not None and index not in only:
                    continue
                handle = lib.nvmlDeviceGetHandleByIndex(index)
                name = _text(lib.nvmlDeviceGetName(handle))
                found.append(GpuInfo(
                    index=index, uuid=_text(lib.nvmlDeviceGetUUID(handle)), name=name,
                    gpu_type=gpu_type_for(name), memory_bytes=int(lib.nvmlDeviceGetMemoryInfo(handle).total),
                    driver=driver,
                ))
            return found
    except NvmlUnavailable as error:
        log.info("no GPUs: %s", error)
        return []


def processes_on(indices: tuple[int, ...]) -> list[int]:
    """PIDs of compute processes holding any of these GPUs (as NVML numbers them)."""
    if not indices:
        return []
    try:
        with nvml() as lib:
            pids: list[int] = []
            for index in indices:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
                for process in lib.nvmlDeviceGetComputeRunningProcesses(handle):
                    pids.append(int(process.pid))
            return sorted(set(pids))
    except NvmlUnavailable:
        return []


def memory_of(indices: tuple[int, ...]) -> int:
    """Total memory of these GPUs in bytes (0 without NVML)."""
    try:
        with nvml() as lib:
            return sum(
                int(lib.nvmlDeviceGetMemoryInfo(lib.nvmlDeviceGetHandleByIndex(i)).total) for i in indices
            )
    except NvmlUnavailable:
        return 0


def memory_used(indices: tuple[int, ...]) -> int:
    """GPU memory every compute process holds on these GPUs, in bytes (0 without NVML). A process
    whose figure NVML cannot read counts as nothing: the GPU's own used memory then still bounds
    it (``nvmlDeviceGetMemoryInfo``), so the larger of the two is returned."""
    try:
        with nvml() as lib:
            held, used = 0, 0
            for index in indices:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
                for process in lib.nvmlDeviceGetComputeRunningProcesses(handle):
                    held += int(process.usedGpuMemory or 0)
                used += int(lib.nvmlDeviceGetMemoryInfo(handle).used)
            return max(held, used - DRIVER_RESERVED_BYTES * len(indices))
    except NvmlUnavailable:
        return 0
