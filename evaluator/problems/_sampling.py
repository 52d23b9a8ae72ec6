"""Shared input generation for the problems' ``reference.py`` modules (imports torch).

Determinism: every tensor gets its own ``torch.Generator(device=device)`` seeded with a 63-bit
integer derived (SHA-256) from (seed, distribution, the shape's axes, the tensor's name). So an
input depends on nothing else — not on the order in which tensors are drawn, nor on other shapes
— and two seeds, two distributions or two tensors never share a stream. Inputs are drawn ON the
device; CPU and CUDA generators produce different (each deterministic) streams, which is fine
because the reference is always computed from the very inputs the kernel received.
"""

from __future__ import annotations

import hashlib
import math

import torch

#: Distributions every problem can draw from; a problem may add its own structured ones.
BASIC_DISTRIBUTIONS = ("normal", "uniform", "outliers")
#: Outliers: this fraction of elements is multiplied by OUTLIER_GAIN (heavy-tailed activations).
OUTLIER_FRACTION = 1e-3
OUTLIER_GAIN = 32.0


def derived_seed(seed: int, distribution: str, axes: dict[str, int], name: str) -> int:
    text = f"{seed}|{distribution}|{sorted(axes.items())}|{name}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & (2**63 - 1)


def generator(
    device: str | torch.device, seed: int, distribution: str, axes: dict[str, int], name: str
) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(derived_seed(seed, distribution, axes, name))
    return gen


def sample(
    shape: tuple[int, ...], distribution: str, gen: torch.Generator, device: str | torch.device
) -> torch.Tensor:
    """fp32 values with zero mean and unit variance (outliers aside), drawn on ``device``."""
    if distribution == "normal":
        return torch.randn(shape, generator=gen, device=device)
    if distribution == "uniform":
        values = torch.rand(shape, generator=gen, device=device)
        return values.mul_(2 * math.sqrt(3)).sub_(math.sqrt(3))
    if distribution == "outliers":
        values = torch.randn(shape, generator=gen, device=device)
        spikes = torch.rand(shape, generator=gen, device=device) < OUTLIER_FRACTION
        return torch.where(spikes, values * OUTLIER_GAIN, values)
    raise ValueError(f"unknown distribution {distribution!r}")


def draw(
    name: str,
    shape: tuple[int, ...],
    axes: dict[str, int],
    seed: int,
    device: str | torch.device,
    distribution: str,
    sampler: str | None = None,
) -> torch.Tensor:
    """One fp32 tensor, seeded from ``distribution`` as the module docstring says, with values of
    the basic ``sampler`` (default: the distribution itself). A structured distribution built on
    normal values passes ``sampler="normal"`` and still gets streams of its own."""
    gen = generator(device, seed, distribution, axes, name)
    return sample(shape, sampler or distribution, gen, device)


def draw_signed_or_positive(
    problem: str,
    name: str,
    shape: tuple[int, ...],
    axes: dict[str, int],
    seed: int,
    device: str | torch.device,
    distribution: str,
) -> torch.Tensor:
    """A basic distribution as drawn, or ``positive``: the absolute values of normal draws (sums
    that grow without cancelling: prefix_sum, reduction_sum)."""
    positive = distribution == "positive"
    if not positive and distribution not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"{problem} has no distribution {distribution!r}")
    x = draw(name, shape, axes, seed, device, distribution, "normal" if positive else None)
    return x.abs_() if positive else x


#: The sampling problems' logits ~ LOGIT_SPREADS[distribution] x N(0, 1): how peaked the rows are
#: (llm 3: the most probable token holds ~5% at V = 128k; flat 2; sharp 5: a few tokens hold most
#: of the mass).
LOGIT_SPREADS = {"llm": 3.0, "flat": 2.0, "sharp": 5.0}


def sampler_logits(
    problem: str, rows: int, vocabulary: int, axes: dict[str, int], seed: int, device: str | torch.device,
    distribution: str,
) -> tuple[torch.Tensor, torch.Generator]:
    """top_p_sampling's and top_k_sampling's logits (rows, vocabulary) fp32, and the generator they
    came from (the problem draws its per-row decisions from it next)."""
    if distribution not in LOGIT_SPREADS:
        raise ValueError(f"{problem} has no distribution {distribution!r}")
    gen = generator(device, seed, distribution, axes, "logits")
    return torch.randn((rows, vocabulary), generator=gen, device=device) * LOGIT_SPREADS[distribution], gen


def row_scales(
    rows: int, axes: dict[str, int], seed: int, device: str | torch.device, name: str, octaves: float = 3.0
) -> torch.Tensor:
    """Per-row factors 2^U(-octaves, octaves): structured dynamic range across rows, shape (rows, 1)."""
    gen = generator(device, seed, "row_scales", axes, name)
    exponent = torch.rand((rows, 1), generator=gen, device=device).mul_(2 * octaves).sub_(octaves)
    return torch.exp2(exponent)


def tn_gemm_operands(
    problem: str, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 operands of a TN GEMM: A (M, K) and B (N, K), B scaled by 1/sqrt(K) so the product is
    O(1); ``rowscale`` draws normal values and gives every row of A and B its own magnitude."""
    m, n, k = axes["M"], axes["N"], axes["K"]
    sampler = "normal" if distribution == "rowscale" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"{problem} has no distribution {distribution!r}")
    a = draw("A", (m, k), axes, seed, device, distribution, sampler)
    b = draw("B", (n, k), axes, seed, device, distribution, sampler).div_(math.sqrt(k))
    if distribution == "rowscale":
        a.mul_(row_scales(m, axes, seed, device, "A"))
        b.mul_(row_scales(n, axes, seed, device, "B"))
    return a, b
