"""Targets a PTX/CUDA submission can be built for, and the limits the launch spec must respect.

Numbers come from the CUDA programming guide's compute-capability tables; sm_100a (B200) is
supported from those specifications only: not yet verified on hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.ptx.errors import SpecError


@dataclass(frozen=True)
class Arch:
    name: str
    gpus: str
    max_smem_per_block: int  # static + dynamic, bytes, after opting in
    clusters: bool
    min_ptx_version: tuple[int, int]
    verified_on_hardware: bool

    @property
    def gencode(self) -> str:
        number = self.name.removeprefix("sm_")
        return f"-gencode=arch=compute_{number},code={self.name}"


ARCHS = {
    "sm_90a": Arch("sm_90a", "H100, H200", 227 * 1024, True, (7, 8), True),
    "sm_90": Arch("sm_90", "H100, H200 (no wgmma/setmaxnreg)", 227 * 1024, True, (7, 8), True),
    "sm_100a": Arch("sm_100a", "B200", 227 * 1024, True, (8, 6), False),
    "sm_80": Arch("sm_80", "A100", 163 * 1024, False, (7, 0), False),
}
#: GPU type (catalogue key) -> target its runner builds for.
GPU_ARCH = {"h100": "sm_90a", "h200": "sm_90a", "b200": "sm_100a"}
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


def get_arch(name: str) -> Arch:
    if name not in ARCHS:
        raise SpecError(f"unknown architecture {name!r}; known: {', '.join(ARCHS)}")
    return ARCHS[name]


def arch_for_capability(major: int, minor: int) -> str:
    """The target a device of this compute capability runs (arch-specific 'a' where it exists)."""
    name = {(9, 0): "sm_90a", (10, 0): "sm_100a", (8, 0): "sm_80"}.get((major, minor))
    if name is None:
        raise SpecError(f"no PTX target known for compute capability {major}.{minor}")
    return name
