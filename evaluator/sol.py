"""Speed of light: the least time physics allows for one call, from exact counts and GPU peaks.

    t_SOL = max(t_compute, t_memory, t_link)

- ``t_compute``: flops of each class over that class's peak. Classes that run on the same units
  add up, classes on different units may overlap, so we take the max over pipes of the sum over
  each pipe's classes. The tensor pipe holds bf16, fp16, fp8, tf32 and fp64 (DMMA runs on tensor
  cores on Hopper and Blackwell); the SIMT pipe holds fp32. Summing across pipes would overstate
  t_SOL for a kernel that overlaps its softmax with its GEMMs (FlashAttention-3 does), and a
  t_SOL that is too large lets an honest kernel look faster than light.
- ``t_memory``: minimum HBM bytes over the HBM peak.
- ``t_link``: bytes each GPU must send over its links, over the per-direction link peak.

Counts of a multi-GPU problem are totals of the whole call over all ranks, except ``comm_bytes``,
which is per GPU (docs/scoring.md); the flops and bytes are divided by the world size (perfect split).
Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evaluator.gpu_specs import GpuSpec, with_ceilings
from evaluator.problems import Counts

#: Which flop classes share execution units (see the module docstring).
PIPES: dict[str, tuple[str, ...]] = {
    "tensor": ("bf16_tensor", "fp16_tensor", "fp8_tensor", "tf32_tensor", "fp64"),
    "simt": ("fp32_simt",),
}

Bound = Literal["compute", "memory", "link"]


@dataclass(frozen=True)
class SolBound:
    """t_SOL of one shape on one GPU, with the terms that made it."""

    t_sol_s: float
    bound: Bound
    t_compute_s: float
    t_memory_s: float
    t_link_s: float
    t_by_class_s: dict[str, float]

    @property
    def t_sol_us(self) -> float:
        return self.t_sol_s * 1e6


def has_counts(counts: Counts) -> bool:
    """Whether a problem's counts say anything: an imported problem whose counts could be neither
    given nor derived has zero flops and zero bytes, and no speed of light (not "compute, 0 us")."""
    return counts.bytes > 0 or counts.comm_bytes > 0 or counts.total_flops > 0


def compute_time_s(counts: Counts, spec: GpuSpec, world_size: int = 1) -> tuple[float, dict[str, float]]:
    """Least compute time (max over pipes of summed class times) and the time of each class."""
    by_class = {
        flop_class: flops / world_size / spec.peak_flops(flop_class)
        for flop_class, flops in counts.flops.items()
        if flops > 0
    }
    pipe_times = [sum(by_class.get(c, 0.0) for c in classes) for classes in PIPES.values()]
    return max(pipe_times, default=0.0), by_class


def t_sol(counts: Counts, spec: GpuSpec, world_size: int = 1) -> SolBound:
    """Datasheet speed of light of one call. Raises GpuSpecError when a needed peak is unknown."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    t_compute, by_class = compute_time_s(counts, spec, world_size)
    t_memory = counts.bytes / world_size / spec.hbm_bytes_per_s() if counts.bytes > 0 else 0.0
    t_link = counts.comm_bytes / spec.link_bytes_per_s() if counts.comm_bytes > 0 else 0.0
    terms: dict[Bound, float] = {"compute": t_compute, "memory": t_memory, "link": t_link}
    bound = max(terms, key=lambda name: terms[name])
    return SolBound(terms[bound], bound, t_compute, t_memory, t_link, by_class)


def t_sol_attainable(
    counts: Counts, spec: GpuSpec, ceilings: dict[str, float], world_size: int = 1
) -> SolBound:
    """Same bound from calibrated attainable ceilings, e.g. ``{"bf16_tensor_tflops": 700,
    "hbm_tbps": 4.2}``; figures not calibrated keep their datasheet peak."""
    return t_sol(counts, with_ceilings(spec, ceilings), world_size)
