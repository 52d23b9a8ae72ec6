"""Reference line: Liger-Kernel's SwiGLU MLP as LigerSwiGLUMLP computes it: the two projections
with torch.matmul (cuBLAS), then Liger's SiLU-and-multiply (one Triton kernel) into out.

The product is Liger's own output, copied into out.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_swiglu

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel SwiGLU MLP (cuBLAS projections + liger_swiglu)",
    "package": "liger-kernel", "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel",
    "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)


def kernel(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(liger_swiglu(torch.matmul(x, W1.t()), torch.matmul(x, W3.t())))
