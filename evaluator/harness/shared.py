"""Buffers the trusted judge owns and lends to the untrusted child (docs/security.md, "Judge").

The judge allocates every input and output tensor a kernel call sees, writes the inputs, and
reads the outputs itself; the child only maps them. So the child never holds the inputs' only
copy (the judge keeps what it generated), never decides what the outputs were (the judge reads
the memory, not a Python object the child hands back), and never sees any other memory of the
judge: each buffer is its own allocation, exported alone.

- GPU: one ``cudaMalloc`` per buffer, exported with ``cudaIpcGetMemHandle`` (CUDA IPC), opened in
  the child with ``cudaIpcOpenMemHandle``. torch's caching allocator would export a whole segment,
  which can hold the judge's private tensors (references), so it is not used for shared memory.
- CPU development device: one file per buffer under a private folder (tmpfs where there is one),
  ``mmap``-ed shared by both sides (``torch.from_file(shared=True)``).

A buffer travels as a ``BufferHandle`` (plain JSON); ``view`` gives the typed tensor.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evaluator.vocabulary import CUDA

#: Alignment of a tensor inside its buffer (bytes).
ALIGN = 256


@dataclass(frozen=True)
class BufferHandle:
    """What the child needs to map one shared tensor: JSON-able, no pointer of the judge's."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    kind: str  # "cuda_ipc" | "file"
    ref: str  # hex IPC handle, or the file path

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "nbytes": self.nbytes,
                "kind": self.kind, "ref": self.ref}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BufferHandle:
        return cls(str(data["name"]), str(data["dtype"]), tuple(int(v) for v in data["shape"]),
                   int(data["nbytes"]), str(data["kind"]), str(data["ref"]))


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise TypeError(f"unknown dtype {name!r}")
    return value


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    return max(math.prod(shape), 1) * torch.empty((), dtype=dtype).element_size()


def _typed(raw: torch.Tensor, handle: BufferHandle) -> torch.Tensor:
    dtype = _dtype(handle.dtype)
    count = math.prod(handle.shape)
    size = count * torch.empty((), dtype=dtype).element_size()
    return raw[:size].view(dtype).view(handle.shape)


# ---------------------------------------------------------------- CUDA IPC


def _cudart() -> Any:
    from cuda.bindings import runtime

    return runtime


def _ok(result: Any) -> Any:
    error, *values = result if isinstance(result, tuple) else (result,)
    if int(error) != 0:
        raise RuntimeError(f"CUDA runtime error {int(error)} ({error})")
    return values[0] if len(values) == 1 else values


class _CudaArray:
    """The minimal ``__cuda_array_interface__`` torch needs to wrap raw device memory."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (pointer, False), "version": 3, "strides": None,
        }


def _wrap_device(pointer: int, nbytes: int) -> torch.Tensor:
    return torch.as_tensor(_CudaArray(pointer, nbytes), device="cuda")


# ---------------------------------------------------------------- the judge's side


class Arena:
    """Every shared buffer of one job, owned by the judge; ``close`` frees them all."""

    def __init__(self, device: str, folder: Path | None = None) -> None:
        self.device = device
        self.folder = folder
        self._pointers: dict[str, list[int]] = {}
        self._files: dict[str, list[Path]] = {}
        self._other_devices: set[int] = set()
        #: The GPU of every pointer allocated on a given device (freed with that device current).
        self._pointer_device: dict[int, int] = {}

    def tensor(self, name: str, shape: tuple[int, ...], dtype: torch.dtype,
               group: str = "", device_index: int | None = None) -> tuple[torch.Tensor, BufferHandle]:
        """A shared tensor of ``group`` (freed together by ``free(group)``) and its handle.

        ``device_index``: the GPU to allocate on (a multi-GPU job's rank r: GPU r); default the
        current one. Multi-GPU allocation is written from the CUDA documentation, NOT YET RUN ON A GPU."""
        nbytes = _nbytes(shape, dtype)
        if self.device == CUDA and device_index is not None:
            self._other_devices.add(device_index)
            with torch.cuda.device(device_index):
                _ok(_cudart().cudaSetDevice(device_index))  # cudaMalloc allocates on the current device
                raw, (kind, ref) = self._cuda(nbytes, group)
                self._pointer_device[self._pointers[group][-1]] = device_index
        elif self.device == CUDA:
            raw, (kind, ref) = self._cuda(nbytes, group)
        else:
            raw, (kind, ref) = self._file(nbytes, group)
        handle = BufferHandle(name, str(dtype).removeprefix("torch."), tuple(shape), nbytes, kind, ref)
        return _typed(raw, handle), handle

    def _cuda(self, nbytes: int, group: str) -> tuple[torch.Tensor, tuple[str, str]]:
        rt = _cudart()
        size = -(-nbytes // ALIGN) * ALIGN
        pointer = int(_ok(rt.cudaMalloc(size)))
        self._pointers.setdefault(group, []).append(pointer)
        ipc = _ok(rt.cudaIpcGetMemHandle(pointer))
        reserved = ipc.reserved
        raw = reserved if isinstance(reserved, bytes) else bytes(int(v) & 0xFF for v in reserved)
        return _wrap_device(pointer, size), ("cuda_ipc", raw.hex())

    def _file(self, nbytes: int, group: str) -> tuple[torch.Tensor, tuple[str, str]]:
        assert self.folder is not None, "a CPU arena needs a folder"
        path = self.folder / f"{secrets.token_hex(8)}.buf"
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(descriptor, nbytes)
        finally:
            os.close(descriptor)
        self._files.setdefault(group, []).append(path)
        raw = torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)
        return raw, ("file", str(path))

    def free(self, group: str) -> None:
        """Free one group's buffers (the child must have unmapped them first)."""
        pointers = self._pointers.pop(group, [])
        if pointers:
            torch.cuda.synchronize()
            for index in sorted(self._other_devices):  # a multi-GPU job's buffers live on every rank's GPU
                torch.cuda.synchronize(index)
            rt = _cudart()
            for pointer in pointers:
                if pointer not in self._pointer_device:
                    rt.cudaFree(pointer)
                    continue
                index = self._pointer_device.pop(pointer)
                with torch.cuda.device(index):
                    rt.cudaSetDevice(index)
                    rt.cudaFree(pointer)
        for path in self._files.pop(group, []):
            with contextlib.suppress(OSError):
                path.unlink()

    def close(self) -> None:
        for group in list(self._pointers) + list(self._files):
            self.free(group)


# ---------------------------------------------------------------- the child's side


class Mapped:
    """The child's view of the judge's buffers, kept open until the job ends."""

    def __init__(self) -> None:
        self._opened: list[int] = []

    def open(self, handle: BufferHandle) -> torch.Tensor:
        if handle.kind == "cuda_ipc":
            return _typed(self._open_ipc(handle), handle)
        if handle.kind == "file":
            raw = torch.from_file(handle.ref, shared=True, size=handle.nbytes, dtype=torch.uint8)
            return _typed(raw, handle)
        raise ValueError(f"unknown buffer kind {handle.kind!r}")

    def open_all(self, handles: list[dict[str, Any]]) -> list[torch.Tensor]:
        return [self.open(BufferHandle.from_json(handle)) for handle in handles]

    def _open_ipc(self, handle: BufferHandle) -> torch.Tensor:
        rt = _cudart()
        # Mapped into the device torch uses in this process (a multi-GPU rank's own GPU).
        _ok(rt.cudaSetDevice(torch.cuda.current_device()))
        ipc = rt.cudaIpcMemHandle_t()
        raw = bytes.fromhex(handle.ref)
        try:
            ipc.reserved = raw
        except (TypeError, ValueError):
            ipc.reserved = list(raw)
        lazy_peer_access = 1  # cudaIpcMemLazyEnablePeerAccess
        pointer = int(_ok(rt.cudaIpcOpenMemHandle(ipc, lazy_peer_access)))
        self._opened.append(pointer)
        return _wrap_device(pointer, -(-handle.nbytes // ALIGN) * ALIGN)

    def close_all(self) -> None:
        """Unmap everything mapped so far (tensors still pointing there must not be used again)."""
        if self._opened:
            try:
                torch.cuda.synchronize()
            except RuntimeError:
                # A CUDA fault (an illegal address) poisoned this process's context: nothing in it can
                # be unmapped, and the judge ends the job; the mappings go with the process.
                self._opened.clear()
                return
            rt = _cudart()
            for pointer in self._opened:
                rt.cudaIpcCloseMemHandle(pointer)
        self._opened.clear()
