"""Loading a cubin (or PTX, JIT-compiled by the driver) and launching its entry with the CUDA
driver API (cuda-bindings) on torch's current stream. Every CUresult is checked; a failure is a
LaunchError carrying the driver's own name and text for the error."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from cuda.bindings import driver as cu

from evaluator.ptx.errors import LaunchError
from evaluator.ptx.spec import ParamSpec

_DATA_TYPES = {
    "float32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    "float16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    "bfloat16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    "float8_e4m3fn": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "float8_e5m2": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "int32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_INT32,
    "int64": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_INT64,
    "float64": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
}
_SWIZZLE = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}
_L2 = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_INTERLEAVE = {"none": "NONE", "16B": "16B", "32B": "32B"}
_OOB = {"none": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}
_SCALAR_CTYPES: dict[str, Any] = {
    "u32": ctypes.c_uint32,
    "s32": ctypes.c_int32,
    "u64": ctypes.c_uint64,
    "s64": ctypes.c_int64,
    "f32": ctypes.c_float,  # a problem constant, rounded to the nearest fp32
}


def error_text(err: Any) -> str:
    """``CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered``."""
    _, name = cu.cuGetErrorName(err)
    _, text = cu.cuGetErrorString(err)

    def decode(b: Any) -> str:
        return b.decode() if isinstance(b, bytes) else str(b)

    return f"{decode(name)}: {decode(text)}"


def check(result: Any, what: str) -> Any:
    """Unpack a cuda-bindings return tuple, raising LaunchError when its CUresult is not success."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"{what} failed: {error_text(err)}")
    return values[0] if len(values) == 1 else values


@dataclass
class Module:
    handle: Any
    function: Any
    max_dynamic_smem: int = 0

    def unload(self) -> None:
        if self.handle is not None:
            cu.cuModuleUnload(self.handle)
            self.handle = None


def load_module(image: bytes, entry: str) -> Module:
    """Load a cubin, or PTX text (NUL-terminated) for the driver to JIT, into the current context."""
    check(cu.cuInit(0), "cuInit")
    buffer = ctypes.create_string_buffer(image)  # NUL-terminated, as the driver wants PTX text
    handle = check(cu.cuModuleLoadData(ctypes.addressof(buffer)), "cuModuleLoadData")
    function = check(cu.cuModuleGetFunction(handle, entry.encode()), f"cuModuleGetFunction({entry})")
    return Module(handle, function)


def static_smem(module: Module) -> int:
    attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    return int(check(cu.cuFuncGetAttribute(attribute, module.function), "cuFuncGetAttribute"))


def allow_dynamic_smem(module: Module, nbytes: int) -> None:
    """Raise the entry's dynamic shared-memory limit (needed above 48 KB)."""
    if nbytes <= module.max_dynamic_smem:
        return
    attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(
        cu.cuFuncSetAttribute(module.function, attribute, nbytes),
        f"cuFuncSetAttribute(max dynamic smem {nbytes})",
    )
    module.max_dynamic_smem = nbytes


def encode_tensor_map(tensor: Any, dtype: str, param: ParamSpec) -> Any:
    """A CUtensorMap for a row-major tensor: TMA order is innermost first (dims and box alike)."""
    element = tensor.element_size()
    if tensor.stride(-1) != 1:
        raise LaunchError(f"tensor map for {param.tensor!r}: the innermost dimension must be contiguous")
    dims = [int(d) for d in reversed(tensor.shape)]
    strides = [int(s) * element for s in reversed(tensor.stride()[:-1])]
    if tensor.data_ptr() % 16 or any(s % 16 for s in strides):
        raise LaunchError(
            f"tensor map for {param.tensor!r}: TMA needs a 16-byte aligned address and row "
            f"strides that are multiples of 16 bytes (strides {strides} bytes)"
        )
    if len(param.box) != len(dims):
        raise LaunchError(f"tensor map for {param.tensor!r}: box {list(param.box)} vs {len(dims)} dims")
    result = cu.cuTensorMapEncodeTiled(
        _DATA_TYPES[dtype],
        len(dims),
        tensor.data_ptr(),
        [cu.cuuint64_t(d) for d in dims],
        [cu.cuuint64_t(s) for s in strides],
        [cu.cuuint32_t(b) for b in param.box],
        [cu.cuuint32_t(1)] * len(dims),
        getattr(cu.CUtensorMapInterleave, f"CU_TENSOR_MAP_INTERLEAVE_{_INTERLEAVE[param.interleave]}"),
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[param.swizzle]}"),
        getattr(cu.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2[param.l2_promotion]}"),
        getattr(cu.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{_OOB[param.oob_fill]}"),
    )
    return check(result, f"cuTensorMapEncodeTiled({param.tensor}, dims {dims}, box {list(param.box)})")


class ParamArray:
    """The ``void**`` array cuLaunchKernel reads, built once per shape and refilled per call.

    Scalars are fixed for a shape; pointer holders are updated in place; a tensor map's slot
    points straight at its CUtensorMap. The driver copies the values at launch, so reusing the
    storage for the next call is safe. ``keep`` holds the current call's tensor maps alive.
    """

    def __init__(self, kinds: list[str], scalars: dict[int, int | float]) -> None:
        self._holders: list[Any] = []
        for index, kind in enumerate(kinds):
            if kind == "ptr":
                self._holders.append(ctypes.c_uint64(0))
            elif kind == "tensormap":
                self._holders.append(None)
            else:
                self._holders.append(_SCALAR_CTYPES[kind](scalars[index]))
        addresses = [ctypes.addressof(h) if h is not None else 0 for h in self._holders]
        self._array = (ctypes.c_void_p * max(len(kinds), 1))(*addresses)
        self.pointer: int | None = ctypes.addressof(self._array) if kinds else None
        self.keep: list[Any] = []

    def holder(self, index: int) -> Any:
        """The ctypes value a pointer slot points at: set ``.value`` to the tensor's address."""
        return self._holders[index]

    def set_pointer(self, index: int, value: int) -> None:
        self._holders[index].value = value

    def set_tensor_map(self, index: int, tensor_map: Any) -> None:
        self.keep.append(tensor_map)
        self._array[index] = int(tensor_map.getPtr())

    def slot(self, index: int) -> int:
        """Address stored in slot ``index`` (what the driver will read through)."""
        return int(self._array[index] or 0)


_STREAMS: dict[int, Any] = {}


def launch(
    module: Module,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    smem: int,
    stream: int,
    params: int | None,
    cluster: tuple[int, int, int] | None,
) -> None:
    """Enqueue one launch on ``stream`` (a raw cudaStream_t, e.g. torch's current stream);
    ``params`` is the address of the ``void**`` array (ParamArray.pointer)."""
    handle = _STREAMS.get(stream)
    if handle is None:
        handle = _STREAMS.setdefault(stream, cu.CUstream(stream))
    if cluster is None:
        check(cu.cuLaunchKernel(module.function, *grid, *block, smem, handle, params, 0), "cuLaunchKernel")
        return
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = smem
    config.hStream = handle
    attribute = cu.CUlaunchAttribute()
    attribute.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = cluster
    config.attrs = [attribute]
    config.numAttrs = 1
    check(cu.cuLaunchKernelEx(config, module.function, params, 0), "cuLaunchKernelEx")
