"""Reference line: Liger-Kernel's softmax over the last dimension (LigerSoftmaxFunction, Triton).

Liger allocates its own output: it is copied into y, which is what calling it from PyTorch into a
given buffer costs. Needs a liger-kernel with liger_softmax.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_softmax

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel liger_softmax (Triton; output copied into y)", "package": "liger-kernel",
    "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel", "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)


def kernel(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(liger_softmax(x))
