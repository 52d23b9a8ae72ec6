"""Per-shape checks of a launch spec: the grid, block, shared memory, cluster and scalar values
each shape of the problem would get must be launchable on the target."""

from __future__ import annotations

from evaluator.ptx.abi import PtxEntry
from evaluator.ptx.archs import MAX_BLOCK, MAX_GRID, MAX_THREADS, Arch
from evaluator.ptx.errors import SpecError
from evaluator.ptx.spec import LaunchSpec

_SCALAR_RANGE = {
    "u32": (0, 2**32 - 1),
    "s32": (-(2**31), 2**31 - 1),
    "u64": (0, 2**64 - 1),
    "s64": (-(2**63), 2**63 - 1),
}


def check_static(spec: LaunchSpec, arch: Arch, entry: PtxEntry) -> None:
    """What does not depend on the shape: cluster support."""
    if spec.cluster and not arch.clusters:
        raise SpecError(
            f"cluster {list(spec.cluster)} asked for, but {arch.name} has no thread-block clusters"
        )


def check_shape(
    spec: LaunchSpec, arch: Arch, entry: PtxEntry, static_smem: int, axes: dict[str, int]
) -> None:
    """Raises SpecError naming the shape when its launch would be refused or is out of range."""
    where = "shape " + ", ".join(f"{k}={v}" for k, v in axes.items())
    try:
        grid, block, smem = spec.grid_for(axes), spec.block_for(axes), spec.smem_for(axes)
        _check_block(block, entry)
        _check_grid(grid, spec.cluster)
        _check_smem(smem, static_smem, arch)
        _check_scalars(spec, axes)
    except SpecError as error:
        raise SpecError(f"{where}: {error.message}") from error


def _check_block(block: tuple[int, int, int], entry: PtxEntry) -> None:
    threads = block[0] * block[1] * block[2]
    if min(block) < 1 or any(b > m for b, m in zip(block, MAX_BLOCK, strict=True)):
        raise SpecError(f"block {list(block)} is out of range (each dim >= 1, at most {list(MAX_BLOCK)})")
    if threads > MAX_THREADS:
        raise SpecError(f"block {list(block)} has {threads} threads; at most {MAX_THREADS}")
    if entry.reqntid and _pad(entry.reqntid) != block:
        raise SpecError(f"block {list(block)} differs from the entry's .reqntid {list(entry.reqntid)}")
    if entry.maxntid and threads > _volume(entry.maxntid):
        raise SpecError(f"block {list(block)} exceeds the entry's .maxntid {list(entry.maxntid)}")


def _check_grid(grid: tuple[int, int, int], cluster: tuple[int, int, int] | None) -> None:
    if min(grid) < 1 or any(g > m for g, m in zip(grid, MAX_GRID, strict=True)):
        raise SpecError(f"grid {list(grid)} is out of range (each dim >= 1, at most {list(MAX_GRID)})")
    if cluster and any(g % c for g, c in zip(grid, cluster, strict=True)):
        raise SpecError(f"grid {list(grid)} is not a multiple of cluster {list(cluster)}")


def _check_smem(dynamic: int, static: int, arch: Arch) -> None:
    if dynamic < 0:
        raise SpecError(f"dynamic_smem is negative ({dynamic})")
    if dynamic + static > arch.max_smem_per_block:
        raise SpecError(
            f"dynamic_smem {dynamic} + static {static} bytes exceeds {arch.name}'s limit of "
            f"{arch.max_smem_per_block} bytes ({arch.max_smem_per_block // 1024} KB) per block"
        )


def _check_scalars(spec: LaunchSpec, axes: dict[str, int]) -> None:
    for index, param in enumerate(spec.params):
        if param.kind not in _SCALAR_RANGE:
            continue
        low, high = _SCALAR_RANGE[param.kind]
        value = spec.scalar_for(param, axes)
        if not low <= value <= high:
            raise SpecError(f"params[{index}] = {value} does not fit {param.kind}")


def _pad(dims: tuple[int, ...]) -> tuple[int, int, int]:
    x, y, z = (list(dims) + [1, 1, 1])[:3]
    return x, y, z


def _volume(dims: tuple[int, ...]) -> int:
    x, y, z = _pad(dims)
    return x * y * z
