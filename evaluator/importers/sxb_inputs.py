"""SOL-ExecBench's random inputs (its core/bench/io.py), drawn from SOLboard's seeded generators:
randn for floats, fp8 from clamped fp32, integers in a fixed range, booleans as coin flips, and
name heuristics for inputs whose meaning the name gives away (norm weights one, norm biases zero,
masks, cos/sin tables, positive standard deviations, decays, softmax outputs, weight matrices
scaled by 1/sqrt(fan-in)).
"""

from __future__ import annotations

import math
from typing import Any

import torch

# integers in a fixed range, and name heuristics for inputs whose meaning the name gives away.
_INT_RANGES = {
    torch.uint8: (0, 256),
    torch.int8: (-128, 128),
    torch.int16: (-1024, 1024),
    torch.int32: (-1024, 1024),
    torch.int64: (-1024, 1024),
}
_WEIGHT_SUFFIXES = (
    "_weight",
    "_weights",
    "_proj",
    "_projs",
    "_proj_weight",
    "_proj_weights",
    "_weight_matrix",
)
_NORM_SUFFIXES = ("_norm", "_layernorm", "layernorm")
_MASK_NAMES = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_COS_SIN = ("cos", "sin", "cos_cached", "sin_cached", "rope_cos", "rope_sin")
_POSITIVE = ("rstd", "std", "variance", "var")


def _is_norm_param(name: str, suffix: str) -> bool:
    if name == f"norm{suffix}":
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    return prefix.endswith(_NORM_SUFFIXES) or prefix.rstrip("0123456789").endswith(("norm", "layernorm"))


def _is_weight_matrix(name: str, shape: tuple[int, ...]) -> bool:
    if len(shape) < 2:
        return False
    stripped = name.rstrip("0123456789")
    return name.endswith(_WEIGHT_SUFFIXES) or name == "weight" or stripped == "weight" or stripped.endswith(
        _WEIGHT_SUFFIXES
    )


def _heuristic(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, device: Any, gen: torch.Generator, text: str
) -> torch.Tensor | None:
    def randn(*, like: torch.dtype = dtype) -> torch.Tensor:
        return torch.randn(shape, dtype=like, device=device, generator=gen)

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=device).uniform_(low, high, generator=gen)

    if _is_norm_param(name, "_weight"):
        return torch.ones(shape, dtype=dtype, device=device)
    if _is_norm_param(name, "_bias"):
        return torch.zeros(shape, dtype=dtype, device=device)
    causal = name in ("attention_mask", "causal_mask") or ("attention mask" in text and "causal" in text)
    if len(shape) >= 2 and shape[-1] == shape[-2] and causal:
        mask = torch.zeros(shape, dtype=dtype, device=device)
        upper = torch.triu(torch.ones(shape[-1], shape[-1], device=device), diagonal=1).bool()
        mask[..., upper] = torch.finfo(dtype).min
        return mask
    binary_words = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
    if name in _MASK_NAMES or (name.endswith("_mask") and any(word in text for word in binary_words)):
        return torch.randint(0, 2, shape, device=device, generator=gen).to(dtype)
    if name in _COS_SIN:
        angle = randn(like=torch.float32).clamp_(-math.pi, math.pi)
        return (torch.cos(angle) if "cos" in name else torch.sin(angle)).to(dtype)
    stripped = name.rstrip("0123456789")
    if (
        name in _POSITIVE
        or name.endswith(("_rstd", "_std", "_variance", "_var"))
        or stripped in _POSITIVE
        or (stripped.endswith(("_rstd", "_std", "_var")))
    ):
        return randn().abs() + 0.1
    decay = {"A_cumsum": (-0.1, 0.0), "A_log": (-5.0, -1.0), "A": (-1.0, -0.001), "g": (-5.0, 0.0)}
    if name in decay:
        values = uniform(*decay[name])
        return values.cumsum(dim=-1) if name == "A_cumsum" else values
    softmax_out = name in ("attn_weights", "attention_weights", "routing_weights") or (
        "softmax" in text and "output" in text
    )
    if softmax_out:
        return torch.softmax(randn(like=torch.float32), dim=-1).to(dtype)
    if _is_weight_matrix(name, shape):
        return randn() / math.sqrt(shape[-1])
    return None


def random_input(
    name: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str | torch.device,
    gen: torch.Generator,
    description: str | None = None,
    op_type: str | None = None,
) -> torch.Tensor:
    """One ``random`` input the way SOL-ExecBench draws it, from ``gen``."""
    value = None
    if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        value = _heuristic(name, shape, dtype, device, gen, (description or "").lower())
    if value is None:
        if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            value = torch.randn(shape, dtype=dtype, device=device, generator=gen)
        elif dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            value = (
                torch.randn(shape, dtype=torch.float32, device=device, generator=gen)
                .clamp_(-2.0, 2.0)
                .to(dtype)
            )
        elif dtype is torch.bool:
            value = torch.randint(0, 2, shape, device=device, generator=gen).to(torch.bool)
        elif dtype in _INT_RANGES:
            low, high = _INT_RANGES[dtype]
            value = torch.randint(low, high, shape, dtype=dtype, device=device, generator=gen)
        else:
            raise ValueError(f"input {name}: no random values for {dtype}")
    if op_type == "sampling" and name == "probs":
        value = torch.softmax(value, dim=-1)
    return value


