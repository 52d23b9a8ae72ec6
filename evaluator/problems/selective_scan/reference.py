"""selective_scan inputs, reference (fp64, chunk by chunk) and baseline (ssd_minimal in eager torch).

The scan of Mamba-2's SSD layer (mamba_chunk_scan_combined with D = None, z = None, no dt bias or
softplus): head h belongs to group g = h // (H/G) and carries a state S (P, N) from zero,
    S_t = exp(dt[t, h] * A[h]) * S_(t-1) + dt[t, h] * outer(x[t, h, :], Bm[t, g, :])
    y[t, h, :] = S_t @ Cm[t, g, :]
i.e. y[t, h, p] = sum over s <= t of exp(dt[s+1..t, h] summed, times A[h]) * dt[s, h] *
(Cm[t, g] . Bm[s, g]) * x[s, h, p].
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluator.problems._sampling import BASIC_DISTRIBUTIONS, draw, generator
from evaluator.problems.selective_scan.counts import CHUNK

#: Per-head time steps: dt_h log-uniform in [DT_MIN, DT_MAX] (Mamba-2's dt initialisation range),
#: times exp(DT_JITTER * N(0,1)) per token; A[h] = -U(1, 16) (Mamba-2's A_init_range).
DT_MIN, DT_MAX, DT_JITTER = 1e-3, 1e-1, 0.5
A_RANGE = (1.0, 16.0)
#: `long_memory`: dt_h in [1e-4, 1e-3] and A in -U(0.1, 1): dt * A from -1e-3 to -1e-5, so a state
#: remembers 1k to 100k tokens, across many chunks.
LONG_DT, LONG_A = (1e-4, 1e-3), (0.1, 1.0)
DISTRIBUTIONS = (*BASIC_DISTRIBUTIONS, "long_memory")


def _log_uniform(
    shape: tuple[int, ...], bounds: tuple[float, float], gen: torch.Generator, device: str | torch.device
) -> torch.Tensor:
    low, high = math.log(bounds[0]), math.log(bounds[1])
    return torch.exp(torch.rand(shape, generator=gen, device=device) * (high - low) + low)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    b, seq, h, p, g, n = (axes[name] for name in ("B", "L", "H", "P", "G", "N"))
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"selective_scan has no distribution {distribution!r}")
    if h % g:
        raise ValueError(f"H={h} must be a multiple of G={g}")
    sampler = "normal" if distribution == "long_memory" else distribution
    x = draw("x", (b, seq, h, p), axes, seed, device, distribution, sampler)
    bm = draw("Bm", (b, seq, g, n), axes, seed, device, distribution, sampler)
    cm = draw("Cm", (b, seq, g, n), axes, seed, device, distribution, sampler)
    long = distribution == "long_memory"
    gen = generator(device, seed, distribution, axes, "dt")
    dt_head = _log_uniform((h,), LONG_DT if long else (DT_MIN, DT_MAX), gen, device)
    jitter = torch.randn((b, seq, h), generator=gen, device=device).mul_(DT_JITTER).exp_()
    low, high = LONG_A if long else A_RANGE
    a = torch.rand((h,), generator=generator(device, seed, distribution, axes, "A"), device=device)
    return {
        "x": x.to(torch.bfloat16),
        "dt": (dt_head * jitter).float(),
        "A": -(a * (high - low) + low),
        "Bm": bm.to(torch.bfloat16),
        "Cm": cm.to(torch.bfloat16),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64, chunk after chunk (at most (CHUNK, CHUNK, H) values at once), one batch element at a
    time; inside a chunk the decays are differences of running sums of dt * A."""
    x, dt, a = inputs["x"].double(), inputs["dt"].double(), inputs["A"].double()
    bm, cm = inputs["Bm"].double(), inputs["Cm"].double()
    b, seq, h, p = x.shape
    g, n = bm.shape[2], bm.shape[3]
    heads_per_group = h // g
    y = torch.empty_like(x)
    for row in range(b):
        state = torch.zeros((h, p, n), dtype=torch.float64, device=x.device)
        for start in range(0, seq, CHUNK):
            stop = min(start + CHUNK, seq)
            xs, dts = x[row, start:stop], dt[row, start:stop]  # (q, H, P), (q, H)
            bs = bm[row, start:stop].repeat_interleave(heads_per_group, dim=1)  # (q, H, N)
            cs = cm[row, start:stop].repeat_interleave(heads_per_group, dim=1)
            cumulative = torch.cumsum(dts * a, dim=0)  # (q, H)
            segments = cumulative[:, None, :] - cumulative[None, :, :]  # (l, s, H)
            causal = torch.ones(stop - start, stop - start, dtype=torch.bool, device=x.device).tril()
            decay = torch.exp(segments.masked_fill(~causal[:, :, None], -math.inf))
            weights = torch.einsum("lhn,shn->lsh", cs, bs) * decay * dts[None, :, :]
            y[row, start:stop] = (
                torch.einsum("lsh,shp->lhp", weights, xs)
                + torch.einsum("lhn,hpn->lhp", cs, state) * torch.exp(cumulative)[:, :, None]
            )
            to_end = torch.exp(cumulative[-1][None, :] - cumulative) * dts  # (q, H)
            state = state * torch.exp(cumulative[-1])[:, None, None] + torch.einsum(
                "sh,shp,shn->hpn", to_end, xs, bs
            )
    return {"y": y}


def _segsum(values: torch.Tensor) -> torch.Tensor:
    """ssd_minimal's stable segment sum: out[..., i, j] = values[..., j+1] + ... + values[..., i]
    for j <= i (a cumulative sum of a masked copy, not a difference of cumulative sums), -inf
    above the diagonal."""
    length = values.shape[-1]
    repeated = values[..., None].expand(*values.shape, length)
    below = torch.tril(torch.ones(length, length, dtype=torch.bool, device=values.device), diagonal=-1)
    sums = torch.cumsum(repeated.masked_fill(~below, 0), dim=-2)
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=values.device))
    return sums.masked_fill(~causal, -math.inf)


def ssd_minimal(
    x: torch.Tensor, a: torch.Tensor, bm: torch.Tensor, cm: torch.Tensor, chunk: int
) -> torch.Tensor:
    """ssd_minimal_discrete of the mamba repository (Listing 1 of the Mamba-2 paper) in plain torch:
    x (b, L, H, P) already times dt, a (b, L, H) = A * dt, bm and cm (b, L, G, N), L a multiple of
    ``chunk``. Heads are split as (G, H/G) so every head reads its own group's B and C (the
    repository's einsums sum over groups, which is right for G = 1 only)."""
    b, seq, h, p = x.shape
    g, n = bm.shape[2], bm.shape[3]
    c, r = seq // chunk, h // g
    x = x.view(b, c, chunk, g, r, p)
    bm, cm = bm.view(b, c, chunk, g, n), cm.view(b, c, chunk, g, n)
    a = a.view(b, c, chunk, g, r).permute(0, 3, 4, 1, 2)  # (b, g, r, c, l)
    a_cumsum = torch.cumsum(a, dim=-1)
    # 1. intra-chunk outputs (the diagonal blocks)
    decay = torch.exp(_segsum(a))  # (b, g, r, c, l, s)
    y_diag = torch.einsum("bclgn,bcsgn,bgrcls,bcsgrp->bclgrp", cm, bm, decay, x)
    # 2. each chunk's own final state
    decay_states = torch.exp(a_cumsum[..., -1:] - a_cumsum)  # (b, g, r, c, l)
    states = torch.einsum("bclgn,bgrcl,bclgrp->bcgrpn", bm, decay_states, x)
    # 3. states passed between chunks (from the zero state)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(_segsum(F.pad(a_cumsum[..., -1], (1, 0))))  # (b, g, r, c+1, c+1)
    states = torch.einsum("bgrzc,bcgrpn->bzgrpn", decay_chunk, states)[:, :-1]
    # 4. inter-chunk outputs: each chunk's incoming state read by its C
    y_off = torch.einsum("bclgn,bcgrpn,bgrcl->bclgrp", cm, states, torch.exp(a_cumsum))
    return (y_diag + y_off).reshape(b, seq, h, p)


def baseline(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, Bm: torch.Tensor, Cm: torch.Tensor, y: torch.Tensor
) -> None:
    """ssd_minimal in fp32 with Mamba-2's chunk of 256, the sequence padded to whole chunks (dt = 0
    and x = 0 past the end: no decay and no input, so the real tokens' outputs are unchanged)."""
    seq = x.shape[1]
    pad = -seq % CHUNK
    xs = F.pad(x.float() * dt[..., None], (0, 0, 0, 0, 0, pad))
    a = F.pad(dt * A, (0, 0, 0, pad))
    bm = F.pad(Bm.float(), (0, 0, 0, 0, 0, pad))
    cm = F.pad(Cm.float(), (0, 0, 0, 0, 0, pad))
    y.copy_(ssd_minimal(xs, a, bm, cm, CHUNK)[:, :seq])
