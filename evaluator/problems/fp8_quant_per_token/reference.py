"""fp8_quant_per_token inputs, reference (fp64) and baseline (eager torch: amax, divide, cast).

Shared with fp8_quant_per_block, whose groups are 1 x 128 slices of a row instead of whole rows:
``quantisation_input`` draws x, ``quantise_groups`` is the reference of both.
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator

#: The largest finite float8_e4m3fn value.
FP8_MAX = 448.0
#: Floor of a group's amax (DeepSeek-V3's act_quant): an all-zero group gets scale EPS / 448, not 0.
EPS = 1e-4
#: ``padding``: this fraction of the groups is all zeros and as many hold values ~ TINY_SCALE (amax
#: below EPS), drawn per seed.
PADDING_FRACTION = 0.25
TINY_SCALE = 1e-6


def quantisation_input(
    problem: str,
    axes: dict[str, int],
    seed: int,
    device: str | torch.device,
    distribution: str,
    group: int,
) -> torch.Tensor:
    """x (T, H) bf16 of the basic sampler; under ``padding`` (normal values) a seeded quarter of the
    groups of ``group`` consecutive values in a row is zeroed and another quarter scaled to ~1e-6."""
    t, h = axes["T"], axes["H"]
    sampler = "normal" if distribution == "padding" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"{problem} has no distribution {distribution!r}")
    x = draw("x", (t, h), axes, seed, device, distribution, sampler)
    if distribution == "padding":
        gen = generator(device, seed, distribution, axes, "padded_groups")
        kind = torch.rand((t, h // group, 1), generator=gen, device=device)
        groups = x.view(t, h // group, group)
        groups.mul_(torch.where(kind < PADDING_FRACTION, 0.0, 1.0))
        groups.mul_(torch.where(kind > 1 - PADDING_FRACTION, TINY_SCALE, 1.0))
    return x.to(torch.bfloat16)


def quantise_groups(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scales) in fp64 for groups of ``group`` consecutive values of each row: scale = max(amax,
    EPS) / 448 rounded to fp32 (the stored scale), q = x / that scale, unrounded (the tolerance
    allows half an e4m3 step around it), clamped to +-448 (a no-op: |x| <= amax)."""
    t, h = x.shape
    values = x.double().view(t, h // group, group)
    amax = values.abs().amax(dim=-1, keepdim=True).clamp_min(EPS)
    scale = (amax / FP8_MAX).float().double()
    q = (values / scale).clamp_(-FP8_MAX, FP8_MAX)
    return q.view(t, h), scale.view(t, h // group)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    return {"x": quantisation_input("fp8_quant_per_token", axes, seed, device, distribution, axes["H"])}


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    q, scale = quantise_groups(inputs["x"], axes["H"])
    return {"q": q, "scale": scale}


def baseline(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """Eager torch: the row's amax (vector_norm with ord=inf: one reduction, no |x| tensor), the fp32
    scale, then x / scale computed in fp32 and written straight into q as e4m3 (``div(out=q)``: round
    to nearest even, one kernel, no fp32 (T, H) temporary). No clamp: |x / scale| <= 448 (1 + 2^-23),
    which rounds to 448, so saturation never triggers. Version 2; bitwise version 1's bytes."""
    _row_scales(x, scale)
    torch.div(x, scale, out=q)


def copy_baseline(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """Version 1's baseline: the quotient as an fp32 (T, H) tensor, then a second kernel casts it into q."""
    _row_scales(x, scale)
    q.copy_(x / scale)


def _row_scales(x: torch.Tensor, scale: torch.Tensor) -> None:
    amax = torch.linalg.vector_norm(x, float("inf"), dim=-1, keepdim=True).float()
    torch.div(amax.clamp_min_(EPS), FP8_MAX, out=scale)
