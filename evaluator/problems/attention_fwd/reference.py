"""attention_fwd inputs, reference (fp64, chunked) and baseline (SDPA's cuDNN backend via aten;
FlashAttention-2 where cuDNN refuses, and on the CPU)."""

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
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    """SDPA's cuDNN backend called directly with compute_log_sumexp, so that it also hands back the
    log-sum-exp (the public F.scaled_dot_product_attention returns O only; on Hopper it dispatches
    to this backend). Where cuDNN refuses the inputs (no cuDNN attention on this GPU or build), the
    SDPA flash backend, version 1's baseline; on the CPU, the flash backend's CPU kernel."""
    result = cudnn_forward(q, k, v, bool(causal)) if q.device.type == "cuda" else None
    if result is None:
        flash_baseline(q, k, v, o, LSE, causal=causal)
        return
    o.copy_(result[0])
    LSE.copy_(result[1].reshape(LSE.shape))


def flash_baseline(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    """Version 1's baseline: the SDPA flash backend (FlashAttention-2; its CPU kernel on the CPU)."""
    if q.device.type == "cuda":
        result = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, bool(causal))
    else:
        result = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, bool(causal))
    o.copy_(result[0])
    LSE.copy_(result[1])


def cudnn_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, ...] | None:
    """SDPA's cuDNN attention with its log-sum-exp (O, LSE as (B, H, S, 1), ...), or None where cuDNN
    refuses (benchmarks/multigpu_baseline_audit.py calls it per ring chunk too)."""
    return _attention.cudnn_or_none(
        q,
        causal,
        lambda: torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False),
    )
