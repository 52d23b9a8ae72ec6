"""GPU facts for speed-of-light figures, read from ``evaluator/gpus.toml`` (the one data file).

Pure Python, no torch: the web computes SOL figures from the catalogue without a GPU stack.
L2 size, SM count and clocks are deliberately absent: the evaluator reads them from the device at
run time. A GPU that is not in the table gets an *estimated* row from facts NVML reports
(:func:`estimated_spec`), visibly marked ``estimated=True``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from evaluator.problems import FLOP_CLASSES

GPUS_TOML = Path(__file__).resolve().parent / "gpus.toml"

#: Hopper-class SMs issue 128 fp32 FMA per clock (4 sub-partitions x 32 lanes); an FMA is 2 flops.
FP32_FMA_PER_SM_PER_CLOCK = 128
#: Dense tensor-core throughput relative to fp32 SIMT on Hopper (989 / 67 ~ 15; rounded to the
#: hardware ratio 16 at equal clocks). Used only for estimated rows, and labelled as such.
TENSOR_OVER_FP32 = {"bf16_tensor": 16, "fp16_tensor": 16, "fp8_tensor": 32, "tf32_tensor": 8}


class GpuSpecError(ValueError):
    """gpus.toml is malformed, or a peak the caller needs is missing."""


@dataclass(frozen=True)
class GpuSpec:
    """Peaks of one GPU type. ``None`` means unknown (estimated rows, the CPU device)."""

    key: str
    name: str
    arch: str
    peaks_tflops: dict[str, float] = field(default_factory=dict)
    hbm_tbps: float | None = None
    nvlink_gbps_per_direction: float | None = None
    name_patterns: tuple[str, ...] = ()
    development_device: bool = False
    estimated: bool = False
    verified_on_hardware: bool = False
    source: str = ""
    notes: str = ""

    def peak_flops(self, flop_class: str) -> float:
        """Peak in flop/s for one class; raises when this GPU has no figure for it."""
        tflops = self.peaks_tflops.get(flop_class)
        if tflops is None or tflops <= 0:
            raise GpuSpecError(f"{self.key}: no {flop_class} peak")
        return tflops * 1e12

    def hbm_bytes_per_s(self) -> float:
        if not self.hbm_tbps:
            raise GpuSpecError(f"{self.key}: no HBM bandwidth")
        return self.hbm_tbps * 1e12

    def link_bytes_per_s(self) -> float:
        if not self.nvlink_gbps_per_direction:
            raise GpuSpecError(f"{self.key}: no NVLink bandwidth")
        return self.nvlink_gbps_per_direction * 1e9


def _spec_from_table(key: str, table: dict[str, Any]) -> GpuSpec:
    peaks = {name: float(value) for name, value in table.get("peaks_tflops", {}).items()}
    unknown = set(peaks) - set(FLOP_CLASSES)
    if unknown:
        raise GpuSpecError(f"gpus.toml [{key}]: unknown flop classes {sorted(unknown)}")
    hbm = table.get("hbm_tbps")
    link = table.get("nvlink_gbps_per_direction")
    return GpuSpec(
        key=key,
        name=table["name"],
        arch=table["arch"],
        peaks_tflops=peaks,
        hbm_tbps=float(hbm) if hbm is not None else None,
        nvlink_gbps_per_direction=float(link) if link is not None else None,
        name_patterns=tuple(table.get("name_patterns", [])),
        development_device=bool(table.get("development_device", False)),
        verified_on_hardware=bool(table.get("verified_on_hardware", False)),
        source=table.get("source", ""),
        notes=table.get("notes", ""),
    )


@cache
def load_gpu_specs() -> dict[str, GpuSpec]:
    """Every GPU type of gpus.toml, by key (h100, h200, b200, cpu)."""
    try:
        raw = tomllib.loads(GPUS_TOML.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise GpuSpecError(f"gpus.toml: {error}") from error
    return {key: _spec_from_table(key, table) for key, table in raw.items()}


def get_gpu_spec(key: str) -> GpuSpec:
    specs = load_gpu_specs()
    if key not in specs:
        raise GpuSpecError(f"unknown GPU type {key!r}; known: {', '.join(sorted(specs))}")
    return specs[key]


def gpu_type_for_name(nvml_name: str) -> str:
    """The catalogue key for an NVML device name, or ``unknown:<name>``.

    Matching is exact (case and surrounding spaces aside): a PCIe or NVL variant of a known part
    has lower peaks and must not borrow the SXM row.
    """
    wanted = nvml_name.strip().lower()
    for key, spec in load_gpu_specs().items():
        if any(pattern.strip().lower() == wanted for pattern in spec.name_patterns):
            return key
    return f"unknown:{nvml_name.strip()}"


def estimated_spec(
    name: str, sm_count: int, sm_clock_mhz: float, mem_bus_width_bits: int, mem_clock_mhz: float
) -> GpuSpec:
    """A row for a GPU that is not in gpus.toml, from facts NVML reports. Marked estimated.

    - fp32 SIMT = 128 FMA/SM/clock x 2 flops x SMs x max SM clock (Hopper-like SM).
    - fp64 = fp32 SIMT (Hopper's FP64 tensor rate equals its fp32 rate).
    - tensor classes = fp32 x 16 (bf16, fp16), x 32 (fp8), x 8 (tf32): Hopper ratios, a guess for
      anything else.
    - HBM = bus width / 8 bytes x memory clock x 2 (double data rate). On the H200 (6144 bits,
      3201 MHz) this gives 4.92 TB/s against the datasheet's 4.8.
    - NVLink: unknown (None), so link-bound problems have no SOL on such a GPU.
    """
    fp32 = FP32_FMA_PER_SM_PER_CLOCK * 2 * sm_count * sm_clock_mhz * 1e6 / 1e12
    peaks = {flop_class: fp32 * ratio for flop_class, ratio in TENSOR_OVER_FP32.items()}
    peaks["fp32_simt"] = fp32
    peaks["fp64"] = fp32
    hbm = mem_bus_width_bits / 8 * mem_clock_mhz * 1e6 * 2 / 1e12
    return GpuSpec(
        key=gpu_type_for_name(name),
        name=name,
        arch="unknown",
        peaks_tflops=peaks,
        hbm_tbps=hbm,
        estimated=True,
        source="estimated from NVML facts (SM count, SM clock, memory bus width, memory clock)",
        notes=(
            f"{sm_count} SMs at {sm_clock_mhz:g} MHz, {mem_bus_width_bits}-bit bus at {mem_clock_mhz:g} MHz"
        ),
    )


def with_ceilings(spec: GpuSpec, ceilings: dict[str, float]) -> GpuSpec:
    """The same GPU with calibrated attainable ceilings in place of datasheet peaks.

    Keys: ``<flop_class>_tflops`` (e.g. ``bf16_tensor_tflops``), ``hbm_tbps``,
    ``nvlink_gbps_per_direction``. A figure not calibrated keeps its datasheet value.
    """
    peaks = dict(spec.peaks_tflops)
    for flop_class in FLOP_CLASSES:
        if f"{flop_class}_tflops" in ceilings:
            peaks[flop_class] = float(ceilings[f"{flop_class}_tflops"])
    unknown = (
        set(ceilings) - {f"{c}_tflops" for c in FLOP_CLASSES} - {"hbm_tbps", "nvlink_gbps_per_direction"}
    )
    if unknown:
        raise GpuSpecError(f"unknown calibration keys {sorted(unknown)}")
    return replace(
        spec,
        peaks_tflops=peaks,
        hbm_tbps=float(ceilings.get("hbm_tbps", spec.hbm_tbps or 0)) or None,
        nvlink_gbps_per_direction=float(
            ceilings.get("nvlink_gbps_per_direction", spec.nvlink_gbps_per_direction or 0)
        )
        or None,
    )
