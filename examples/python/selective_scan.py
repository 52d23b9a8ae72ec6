"""Example submission for selective_scan: x (B,L,H,P) bf16, dt (B,L,H) fp32, A (H,) fp32, Bm and Cm
(B,L,G,N) bf16 -> y (B,L,H,P) bf16, the Mamba-2 (SSD) scan from a zero state.

The chunked SSD algorithm in fp32 with chunks of 128 tokens, every step batched over all chunks
(a few dozen kernels, no loop over the sequence): within a chunk the output is an attention-like
product (C B^T, masked and decayed by exp(cumsum(dt A)) differences) with dt x; each chunk's final
state is B^T (decayed dt x); the states are passed between chunks by one product with the matrix
of inter-chunk decays; each chunk's output adds C times its incoming state. Bm and Cm are copied
to every head of their group (repeat_interleave). Honest and slower than a fused kernel: the
(chunk x chunk) decay matrices and the per-head copies go through memory.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 128


def decay_matrix(cumulative: torch.Tensor) -> torch.Tensor:
    """exp(cumulative[..., i] - cumulative[..., j]) for j <= i, 0 above the diagonal."""
    length = cumulative.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=cumulative.device).tril()
    differences = cumulative[..., :, None] - cumulative[..., None, :]
    return torch.exp(differences.masked_fill(~causal, float("-inf")))


def kernel(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, Bm: torch.Tensor, Cm: torch.Tensor, y: torch.Tensor
) -> None:
    b, seq, h, p = x.shape
    heads_per_group = h // Bm.shape[2]
    pad = -seq % CHUNK
    c = (seq + pad) // CHUNK
    xdt = F.pad(x.float() * dt[..., None], (0, 0, 0, 0, 0, pad)).view(b, c, CHUNK, h, p)
    bm = F.pad(Bm.float().repeat_interleave(heads_per_group, dim=2), (0, 0, 0, 0, 0, pad))
    cm = F.pad(Cm.float().repeat_interleave(heads_per_group, dim=2), (0, 0, 0, 0, 0, pad))
    bm, cm = bm.view(b, c, CHUNK, h, -1), cm.view(b, c, CHUNK, h, -1)
    cumulative = F.pad(dt * A, (0, 0, 0, pad)).view(b, c, CHUNK, h).permute(0, 3, 1, 2).cumsum(-1)
    # within each chunk: (C_l . B_s) exp(acum_l - acum_s) (dt x)_s for s <= l
    scores = torch.einsum("bclhn,bcshn->bhcls", cm, bm) * decay_matrix(cumulative)
    y_inside = torch.einsum("bhcls,bcshp->bclhp", scores, xdt)
    # each chunk's own final state, then the states entering every chunk
    to_end = torch.exp(cumulative[..., -1:] - cumulative)  # (b, h, c, l)
    states = torch.einsum("bhcl,bclhp,bclhn->bchpn", to_end, xdt, bm)
    totals = F.pad(cumulative[..., -1], (1, 0)).cumsum(-1)  # (b, h, c + 1)
    entering = torch.einsum("bhij,bjhpn->bihpn", decay_matrix(totals)[..., 1:, 1:], states)
    entering = F.pad(entering[:, :-1], (0, 0, 0, 0, 0, 0, 1, 0))  # chunk 0 starts from zero
    y_outside = torch.einsum("bclhn,bchpn,bhcl->bclhp", cm, entering, torch.exp(cumulative))
    y.copy_((y_inside + y_outside).reshape(b, c * CHUNK, h, p)[:, :seq])
