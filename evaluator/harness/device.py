"""Facts about the device the child runs on, as a ``DeviceInfo`` dict (read at run time), and how the
judge's own host work is set up on it."""

from __future__ import annotations

import platform
from typing import Any

from evaluator.vocabulary import CPU, CPU_GPU_TYPE, CUDA


def single_threaded_host_work() -> None:
    """The judge's torch on one CPU thread, on every device. Its host work (page tables and slot
    masks of paged inputs, group sizes, ``.tolist()``) is small ops; torch's default pool has a thread
    per core, and a pool's small ops stall many-fold as soon as another busy process holds a core
    (the witness process and ncu during the test and ranked stages, the other slots' jobs on a
    runner node, the timing child itself): on a 2-core machine with one core busy,
    paged_decode_attention's 12 shapes' host-side input work took 0.35 s on two threads, 0.05 s on
    one. On the H200 (16 cores; benchmarks/results/witness.md#thread-pool) the per-core pool burned 375 CPU
    seconds in that problem's 29 s test stage (5.6 s and 3 CPU seconds on one thread), and its honest
    baseline scored 0.404 through the runner (0.504 on one thread). The CPU development
    device always ran so (a steadier judge's clock)."""
    import torch

    torch.set_num_threads(1)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def nvml_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # NVML is optional telemetry
        return None


def gpu_type(name: str) -> tuple[str, bool]:
    """(catalogue key, estimated?) for a device name; unknown GPUs are marked estimated."""
    from evaluator.gpu_specs import gpu_type_for_name

    key = gpu_type_for_name(name)
    return key, key.startswith("unknown:")


def nvml_name(index: int = 0) -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # no NVML here
        return None


def device_info(device: str) -> dict[str, Any]:
    """Full facts, read through torch in the child."""
    import torch

    if device == CPU:
        return {
            "kind": CPU,
            "name": cpu_name(),
            "gpu_type": CPU_GPU_TYPE,
            "development_device": True,
            "torch_version": torch.__version__,
        }
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    key, estimated = gpu_type(props.name)
    return {
        "kind": CUDA,
        "name": props.name,
        "gpu_type": key,
        "development_device": False,
        "sm_count": int(props.multi_processor_count),
        "l2_bytes": int(props.L2_cache_size),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": nvml_driver(),
        "cuda_runtime": torch.version.cuda,
        "torch_version": torch.__version__,
        "peaks_estimated": estimated,
    }


def warm_blas(device: str) -> None:
    """One small matrix product per common dtype: BLAS handles and workspaces (cuBLAS, cuBLASLt
    on a GPU) are created now rather than by a job's first call (warm-ups of the judge and the
    child, before any submission exists)."""
    import torch

    dtypes = (torch.float32, torch.bfloat16, torch.float16) if device == CUDA else (torch.float32,)
    for dtype in dtypes:
        matrix = torch.ones(64, 64, device=device, dtype=dtype)
        (matrix @ matrix).sum().item()
