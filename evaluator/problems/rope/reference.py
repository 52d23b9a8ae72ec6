"""rope inputs, reference (fp64) and baseline (the rotate_half formulation in torch ops)."""

from __future__ import annotations

import torch
from torch import Tensor

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator, row_scales
from evaluator.problems.rope.counts import HEAD_DIM

#: Llama-3's rotary base and context length: positions are drawn from [0, MAX_POSITION).
THETA = 500_000.0
MAX_POSITION = 131_072
#: ``channels``: every head dimension of q (and of k) gets its own scale 2^U(-CHANNEL_OCTAVES, ...).
CHANNEL_OCTAVES = 3.0


def tables(
    t: int, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str
) -> tuple[Tensor, Tensor]:
    """cos and sin (T, D/2) fp32 of one seeded position per token (a decode batch's tokens sit at
    unrelated positions; a prefill's are consecutive: either way one row per token), angles in fp64."""
    gen = generator(device, seed, distribution, axes, "positions")
    positions = torch.randint(0, MAX_POSITION, (t,), generator=gen, device=device, dtype=torch.int64)
    exponents = torch.arange(0, HEAD_DIM, 2, dtype=torch.float64, device=device) / HEAD_DIM
    angles = positions.double()[:, None] * THETA ** -exponents[None, :]
    return angles.cos().float(), angles.sin().float()


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, Tensor]:
    t = axes["T"]
    sampler = "normal" if distribution == "channels" else distribution
    if sampler not in BASIC_DISTRIBUTIONS:
        raise ValueError(f"rope has no distribution {distribution!r}")
    heads = {}
    for name in ("q", "k"):
        values = draw(name, (t, axes[f"H{name}"], HEAD_DIM), axes, seed, device, distribution, sampler)
        if distribution == "channels":
            values.mul_(
                row_scales(HEAD_DIM, axes, seed, device, f"{name}_channels", CHANNEL_OCTAVES).view(-1)
            )
        heads[name] = values.to(torch.bfloat16)
    cos, sin = tables(t, axes, seed, device, distribution)
    return {"q": heads["q"], "k": heads["k"], "cos": cos, "sin": sin}


def reference(inputs: dict[str, Tensor], axes: dict[str, int]) -> dict[str, Tensor]:
    """fp64 from the exact inputs: dimension i < D/2 pairs with i + D/2, both turned by angle i."""
    cos, sin = inputs["cos"].double()[:, None, :], inputs["sin"].double()[:, None, :]
    outputs = {}
    for name in ("q", "k"):
        first, second = inputs[name].double().chunk(2, dim=-1)
        outputs[f"{name}_out"] = torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    return outputs


def rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def baseline(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, q_out: Tensor, k_out: Tensor) -> None:
    cos = torch.cat((cos, cos), dim=-1).unsqueeze(1)  # (T, 1, D): every head turns alike
    sin = torch.cat((sin, sin), dim=-1).unsqueeze(1)
    q_out.copy_(q * cos + rotate_half(q) * sin)  # bf16 * fp32 tables: fp32, rounded once by copy_
    k_out.copy_(k * cos + rotate_half(k) * sin)
