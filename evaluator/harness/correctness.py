"""Correctness of one call: poison, input digests, output identity, tolerance comparison.

Order matters (docs/harness.md): inputs are generated and digested, outputs are poisoned, the
kernel runs and the device synchronises, the outputs' identity and the inputs' digests are checked,
and only THEN is the reference computed, so the kernel can never read it (class 6).
The reference is poisoned before it is freed, so the caching allocator never hands a previous
answer to a later allocation (classes 6 and 13).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evaluator.vocabulary import Status

#: Integer outputs are filled with this sentinel before every call.
INT_POISON = -0x5A5A5A5B
#: Elements reported in ``worst``.
WORST_COUNT = 3
#: Multiplier of the position-dependent digest (Knuth's multiplicative hash constant).
_DIGEST_MULTIPLIER = 2654435761
_DIGEST_MODULUS = 1000003

_dtype = torch.dtype
_float_types = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def poison_(tensor: torch.Tensor) -> None:
    """Fill with NaN (floats; 0x7F bytes are NaN in both fp8 formats) or the integer sentinel."""
    if tensor.dtype in _float_types:
        tensor.fill_(math.nan)
    elif tensor.is_floating_point() and tensor.element_size() == 1:
        tensor.view(torch.uint8).fill_(0x7F)
    else:
        tensor.fill_(INT_POISON if tensor.dtype in (torch.int32, torch.int64) else 0x5B)


def torch_dtype(name: str) -> torch.dtype:
    value = getattr(torch, name, None)
    if not isinstance(value, _dtype):
        raise TypeError(f"unknown dtype {name!r}")
    return value


def allocate_outputs(specs: Any, axes: dict[str, int], device: str) -> dict[str, torch.Tensor]:
    """Fresh, contiguous, poisoned output tensors in the problem's declared order."""
    outputs = {}
    for spec in specs:
        tensor = torch.empty(spec.concrete_shape(axes), dtype=torch_dtype(spec.dtype), device=device)
        poison_(tensor)
        outputs[spec.name] = tensor
    return outputs


def digest(tensor: torch.Tensor) -> tuple[int, int, int]:
    """A content digest computed on the tensor's device, reduced to Python ints.

    Two wrapping 64-bit sums over the tensor's 32-bit words: a plain sum and a sum weighted by a
    pseudo-random function of the position. Integer sums modulo 2^64 are exact and
    order-independent, so the digest is deterministic on any device; zeroing, scaling, permuting
    or partially overwriting an input changes it.
    """
    raw = tensor.detach().contiguous().view(-1).view(torch.uint8)
    pad = (-raw.numel()) % 4
    if pad:
        raw = torch.cat([raw, torch.zeros(pad, dtype=torch.uint8, device=raw.device)])
    words = raw.view(torch.int32).to(torch.int64)
    positions = torch.arange(words.numel(), dtype=torch.int64, device=raw.device)
    weights = (positions * _DIGEST_MULTIPLIER + 12345) % _DIGEST_MODULUS
    return int(words.sum()), int((words * weights).sum()), int(words.numel())


@dataclass(frozen=True)
class Identity:
    """What an output tensor must still be after the call."""

    data_ptr: int
    storage_ptr: int
    storage_bytes: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device


def identity(tensor: torch.Tensor) -> Identity:
    storage = tensor.untyped_storage()
    return Identity(
        tensor.data_ptr(),
        storage.data_ptr(),
        storage.nbytes(),
        tuple(tensor.shape),
        tuple(tensor.stride()),
        tensor.dtype,
        tensor.device,
    )


def check_identity(name: str, tensor: Any, expected: Identity) -> tuple[Status, str] | None:
    """None when the output is still the tensor we allocated; else the status and why."""
    if type(tensor) is not torch.Tensor:
        return (
            Status.REJECTED,
            f"output {name} is now a {type(tensor).__name__}, not a plain torch.Tensor (class 3)",
        )
    if tensor.dtype != expected.dtype or tensor.device != expected.device:
        return (
            Status.INCORRECT_DTYPE,
            (
                f"output {name} changed to {tensor.dtype} on {tensor.device} "
                f"(expected {expected.dtype} on {expected.device})"
            ),
        )
    if tuple(tensor.shape) != expected.shape or tuple(tensor.stride()) != expected.stride:
        return (
            Status.INCORRECT_SHAPE,
            (
                f"output {name} changed to shape {tuple(tensor.shape)} strides {tuple(tensor.stride())} "
                f"(expected {expected.shape} strides {expected.stride})"
            ),
        )
    storage = tensor.untyped_storage()
    if (tensor.data_ptr(), storage.data_ptr(), storage.nbytes()) != (
        expected.data_ptr,
        expected.storage_ptr,
        expected.storage_bytes,
    ):
        return Status.REJECTED, f"output {name} was given other storage (swapped or aliased, class 3)"
    return None


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return list(reversed(index))


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tolerance: Any,
            scale: torch.Tensor | None = None) -> dict[str, Any]:
    """ErrorStats of one output (as a dict): |out-ref| <= allowed error, in fp64.

    ``tolerance`` is the problem's ``OutputTolerance`` for this output; its allowed error is
    computed on the reference in its declared shape (``row_rms`` scales by each row's RMS;
    ``inputs`` by ``scale``, from the reference module's ``error_scale``).
    """
    reference = ref.detach().to(torch.float64)
    scale = None if scale is None else scale.detach().to(torch.float64)
    allowed = torch.broadcast_to(tolerance.allowed_error(reference, scale), reference.shape).reshape(-1)
    got = out.detach().to(torch.float64).reshape(-1)
    expected = reference.reshape(-1)
    diff = (got - expected).abs()
    ref_finite = torch.isfinite(expected)
    ok = diff <= allowed
    # A non-finite reference is matched only by the identical value (NaN by NaN, +inf by +inf).
    same_special = (~ref_finite) & ((got == expected) | (torch.isnan(got) & torch.isnan(expected)))
    ok = torch.where(ref_finite, ok, same_special)
    nonfinite = int((ref_finite & ~torch.isfinite(got)).sum())
    count = max(got.numel(), 1)
    finite_diff = torch.where(torch.isfinite(diff), diff, torch.zeros_like(diff))
    rel = finite_diff / expected.abs().clamp_min(1e-30)
    ranking = torch.where(ok, torch.zeros_like(diff), torch.where(torch.isfinite(diff), diff, math.inf))
    stats = {
        "max_abs_error": _finite_or_none(float(finite_diff.max())) if got.numel() else 0.0,
        "max_rel_error": _finite_or_none(float(torch.where(ref_finite, rel, 0.0).max()))
        if got.numel()
        else 0.0,
        "matched_ratio": float(ok.sum()) / count,
        "nonfinite_count": nonfinite,
        "worst": _worst(name, got, expected, ranking, tuple(out.shape)),
    }
    del got, expected, reference, allowed, diff, ok, finite_diff, rel, ranking
    return stats


def _worst(
    name: str, got: torch.Tensor, expected: torch.Tensor, ranking: torch.Tensor, shape: tuple[int, ...]
) -> list[dict[str, Any]]:
    if got.numel() == 0 or float(ranking.max()) <= 0:
        return []
    k = min(WORST_COUNT, got.numel())
    values, indices = torch.topk(ranking, k)
    worst = []
    for value, flat in zip(values.tolist(), indices.tolist(), strict=True):
        if value <= 0:
            break
        g, e = float(got[flat]), float(expected[flat])
        worst.append(
            {
                "output": name,
                "index": _unravel(int(flat), shape),
                "got": _finite_or_none(g),
                "expected": e if math.isfinite(e) else 0.0,
                "abs_error": _finite_or_none(abs(g - e)),
            }
        )
    return worst


def outputs_pass(errors: dict[str, dict[str, Any]], problem: Any, axes: dict[str, int] | None = None) -> bool:
    """Every output: no NaN/Inf where the reference is finite, and its own matched ratio met (the
    shape's own, at ``axes``, where the problem has per-shape tolerances)."""
    return all(
        stats["nonfinite_count"] == 0
        and stats["matched_ratio"] >= problem.tolerance_for(name, axes).matched_ratio
        for name, stats in errors.items()
    )


def poison_and_release(tensors: dict[str, torch.Tensor]) -> None:
    """Overwrite answers before freeing them (the caching allocator reuses memory as is)."""
    for tensor in tensors.values():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            tensor.detach().fill_(math.nan) if tensor.element_size() > 1 else tensor.detach().view(
                torch.uint8
            ).fill_(0x7F)
        elif isinstance(tensor, torch.Tensor):
            tensor.detach().fill_(0x5B)
    tensors.clear()


ReferenceFn = Callable[[dict[str, torch.Tensor], dict[str, int]], dict[str, torch.Tensor]]
