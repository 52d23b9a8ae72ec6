"""Reference line: Liger-Kernel's LayerNorm (LigerLayerNormFunction, one Triton kernel a row).

Liger allocates its own output: it is copied into y, which is what calling it from PyTorch into a
given buffer costs.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_layer_norm

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel liger_layer_norm (Triton; output copied into y)",
    "package": "liger-kernel", "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel",
    "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)
EPS = 1e-5  # the problem's


def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(liger_layer_norm(x, weight, bias, EPS))
