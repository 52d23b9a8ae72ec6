"""Reference line: Liger-Kernel's RoPE (LigerRopeFunction, one Triton kernel for q and k).

Liger rotates q and k in place, in the (batch, heads, tokens, head_dim) layout with full-width
cos/sin tables: the inputs are copied into q_out and k_out and rotated there (so the inputs stay
as they are), and the tables are widened with cat(cos, cos) as the problem's baseline does. Both
copies are part of what this line measures.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_rope

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel liger_rope (Triton; rotates copies of q and k in place)",
    "package": "liger-kernel", "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel",
    "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)


def kernel(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor,
           k_out: torch.Tensor) -> None:
    q_out.copy_(q)
    k_out.copy_(k)
    wide_cos = torch.cat((cos, cos), dim=-1).unsqueeze(0)  # (1, T, D)
    wide_sin = torch.cat((sin, sin), dim=-1).unsqueeze(0)
    rotated_q, rotated_k = liger_rope(q_out.unsqueeze(0).transpose(1, 2), k_out.unsqueeze(0).transpose(1, 2),
                                      wide_cos, wide_sin)
    for rotated, out in ((rotated_q, q_out), (rotated_k, k_out)):
        if rotated.data_ptr() != out.data_ptr():  # a version that does not rotate in place
            out.copy_(rotated.transpose(1, 2).squeeze(0))
