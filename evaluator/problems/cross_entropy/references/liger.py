"""Reference line: Liger-Kernel's fused cross entropy (one Triton kernel a row: online log-sum-exp
and the target's logit), called as a user would, per-row losses (reduction="none").

Liger computes gradients in place of the logits only when they require grad; here they do not,
so the inputs stay as they are. Its losses are copied into the harness's output (T floats).
"""

from __future__ import annotations

from importlib.metadata import version

import torch
from liger_kernel.transformers.functional import liger_cross_entropy

REFERENCE = {
    "label": "liger", "title": "Liger-Kernel liger_cross_entropy (Triton)", "package": "liger-kernel",
    "module": "liger_kernel", "url": "https://github.com/linkedin/Liger-Kernel", "needs_gpu": True,
}
print("solboard-reference: liger-kernel", version("liger-kernel"), flush=True)


def kernel(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    loss.copy_(liger_cross_entropy(logits, target, reduction="none"))
