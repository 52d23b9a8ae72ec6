"""Reference line: Liger-Kernel's SiLU-and-multiply (LigerSiLUMulFunction, one Triton kernel), on
the gate and up halves of x, as Liger's SwiGLU MLP calls it.

Liger allocates its own output: it is copied into y (one more read and write of y than the
kernel alone), which is what calling it from PyTorch into a given buffer costs.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_swiglu

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel liger_swiglu (Triton; output copied into y)", "package": "liger-kernel",
    "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel", "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    half = x.shape[-1] // 2
    y.copy_(liger_swiglu(x[:, :half], x[:, half:]))
