"""attention_bwd inputs, reference (fp64, chunked) and baseline (FlashAttention-2 backward)."""

from __future__ import annotations

import torch

from evaluator.problems import _attention


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """q, k, v, dO drawn; o (bf16) and lse (fp32) from the fp64 forward of those q, k, v."""
    tensors = _attention.draw_qkv(axes, seed, device, distribution, ("q", "k", "v", "dO"))
    out, lse = _attention.forward(tensors["q"], tensors["k"], tensors["v"], axes)
    return {
        "q": tensors["q"],
        "k": tensors["k"],
        "v": tensors["v"],
        "o": out.to(torch.bfloat16),
        "dO": tensors["dO"],
        "lse": lse.float(),
    }


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    return _attention.backward(inputs, axes)


def baseline(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    dO: torch.Tensor,
    lse: torch.Tensor,
    dq: torch.Tensor,
    dk: torch.Tensor,
    dv: torch.Tensor,
    *,
    causal: int,
) -> None:
    """The SDPA flash backend's backward, fed the given o and lse (no forward recompute)."""
    if q.device.type == "cuda":
        seq = q.shape[2]
        # None = undefined tensors: no cumulative sequence lengths (a dense batch, not varlen), no
        # dropout RNG state; exactly what the forward hands its backward in this case.
        grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dO, q, k, v, o, lse, None, None, seq, seq, 0.0, bool(causal), None, None
        )
    else:
        grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dO, q, k, v, o, lse, 0.0, bool(causal)
        )
    for target, grad in zip((dq, dk, dv), grads, strict=True):
        target.copy_(grad)
