"""attention_bwd inputs, reference (fp64, chunked) and baseline (SDPA's cuDNN backward; FlashAttention-2's
backward where cuDNN refuses, and on the CPU)."""

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
    """SDPA's cuDNN backward fed the given o and lse (no forward recompute), the backend attention_fwd's
    baseline takes; where cuDNN refuses the inputs, and on the CPU, the flash backend (version 1's
    baseline). Its bookkeeping is built in every call and nothing is kept between calls (the harness
    reuses buffers, so a cache keyed by address would be a cheat's cache): at dropout 0 the RNG seed
    and offset are never read (empty int64 tensors, no kernel), the batch is dense (no cumulative
    sequence lengths), the longest sequences are S, and cuDNN's softmax statistics are the problem's
    LSE as (B, H, S, 1), the layout PyTorch's cuDNN forward allocates for them."""
    grads = _cudnn_backward(q, k, v, o, dO, lse, bool(causal)) if q.device.type == "cuda" else None
    if grads is None:
        flash_baseline(q, k, v, o, dO, lse, dq, dk, dv, causal=causal)
        return
    for target, grad in zip((dq, dk, dv), grads, strict=True):
        target.copy_(grad)


def flash_baseline(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, dO: torch.Tensor, lse: torch.Tensor,
    dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor, *, causal: int,
) -> None:
    """Version 1's baseline: the SDPA flash backend's backward (FlashAttention-2; its CPU kernel on the
    CPU), fed the given o and lse."""
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


def _cudnn_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, dO: torch.Tensor, lse: torch.Tensor,
    causal: bool,
) -> tuple[torch.Tensor, ...] | None:
    def call() -> tuple[torch.Tensor, ...]:
        seed = torch.empty((), dtype=torch.int64, device=q.device)
        offset = torch.empty((), dtype=torch.int64, device=q.device)
        return torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            dO,
            q,
            k,
            v,
            o,
            lse.unsqueeze(-1),
            seed,
            offset,
            None,
            None,
            None,
            q.shape[-2],
            k.shape[-2],
            0.0,
            causal,
        )

    return _attention.cudnn_or_none(q, causal, call)
