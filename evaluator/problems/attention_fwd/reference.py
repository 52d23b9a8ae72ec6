"""attention_fwd inputs, reference (fp64, chunked) and baseline (FlashAttention-2 via aten)."""

from __future__ import annotations

import torch

from evaluator.problems import _attention


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    return _attention.draw_qkv(axes, seed, device, distribution, ("q", "k", "v"))


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    out, lse = _attention.forward(inputs["q"], inputs["k"], inputs["v"], axes)
    return {"O": out, "LSE": lse}


def baseline(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, O: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    """The SDPA flash backend called directly, so that it also hands back its log-sum-exp; the
    public F.scaled_dot_product_attention does not return it."""
    if q.device.type == "cuda":
        result = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, bool(causal))
    else:
        result = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, bool(causal))
    O.copy_(result[0])
    LSE.copy_(result[1])
