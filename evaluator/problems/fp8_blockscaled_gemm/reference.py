"""fp8_blockscaled_gemm inputs, reference (fp64) and baseline.

C[m, n] = sum_k A[m, k] * scale_a[m, k // 128] * B[n, k] * scale_b[n // 128, k // 128]: A (M, K)
and B (N, K) e4m3, scale_a (M, K/128) and scale_b (N/128, K/128) fp32 (the dequantisation
factors, DeepSeek-V3's `scale_inv`), C (M, N) bf16.

Baseline: cuBLASLt's block-scaled fp8 GEMM through torch._scaled_mm where it runs (torch builds
with CUDA >= 12.9, sm_90 and newer; the CPU build has none), found by a probe on the device;
otherwise the operands are dequantised to fp16 in eager torch and multiplied with torch.matmul.
fp16, not bf16: an e4m3 value times an fp32 scale rounded to fp16 keeps 11 significant bits, so
the dequantisation errs by 2^-12 per operand; bf16's 8 bits (2^-9 per operand, on both operands)
put the bf16 fallback at 4.7x gemm_fp8's tolerance under `rowscale` (measured on the CPU). The
values stay far inside fp16's range (|A| < 300, |B| < 1, C ~ O(1) to O(100)).
"""

from __future__ import annotations

import torch

from evaluator.problems import get_problem
from evaluator.problems._sampling import tn_gemm_operands
from evaluator.problems.fp8_blockscaled_gemm.counts import BLOCK

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def quantise(x: torch.Tensor, rows_per_block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 values and fp32 scales of (rows_per_block x 128) blocks: scale = amax(|block|) / 448,
    as DeepSeek-V3's act_quant and weight_quant compute it."""
    r, k = x.shape
    blocks = x.view(r // rows_per_block, rows_per_block, k // BLOCK, BLOCK)
    scales = (blocks.abs().amax(dim=(1, 3)) / E4M3_MAX).clamp_min(1e-30).float()
    q = (blocks / scales[:, None, :, None]).to(E4M3)
    return q.view(r, k), scales


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    if axes["K"] % BLOCK or axes["N"] % BLOCK:
        raise ValueError(f"N={axes['N']} and K={axes['K']} must be multiples of {BLOCK}")
    x, y = tn_gemm_operands("fp8_blockscaled_gemm", axes, seed, device, distribution)
    a, scale_a = quantise(x, 1)
    b, scale_b = quantise(y, BLOCK)
    return {"A": a, "B": b, "scale_a": scale_a, "scale_b": scale_b}


def dequantise(
    q: torch.Tensor, scales: torch.Tensor, rows_per_block: int, dtype: torch.dtype
) -> torch.Tensor:
    """q * its block's scale, computed in fp32 (fp64 for the reference) and rounded to ``dtype``."""
    r, k = q.shape
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    s = scales.to(wide).repeat_interleave(rows_per_block, dim=0)
    return (q.view(r, k // BLOCK, BLOCK).to(wide) * s[..., None]).view(r, k).to(dtype)


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64 from the exact e4m3 values and fp32 scales."""
    a = dequantise(inputs["A"], inputs["scale_a"], 1, torch.float64)
    b = dequantise(inputs["B"], inputs["scale_b"], BLOCK, torch.float64)
    return {"C": a @ b.t()}


def _scaled_mm_blockwise(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    """cuBLASLt's 1x128 x 128x128 recipe: the activation scales outer-dim-major (M contiguous), the
    weight's transposed with B, as torch's own tests of block-wise scaling pass them."""
    torch._scaled_mm(
        A, B.t(), scale_a=scale_a.t().contiguous().t(), scale_b=scale_b.t(), out_dtype=torch.bfloat16, out=C
    )


#: Per CUDA device: does the block-scaled torch._scaled_mm run and agree with the reference?
_BLOCKWISE_WORKS: dict[int, bool] = {}
#: (device, M, N, K) at which it raised although the probe passed (alignment rules): dequantise there.
_BLOCKWISE_REFUSED: set[tuple[int, int, int, int]] = set()


def _probe(device: torch.device) -> bool:
    """One small block-scaled GEMM with scales that differ per row and block (`rowscale`), checked
    against the fp64 reference: a scale layout misread fails it."""
    axes = {"M": 128, "N": 256, "K": 512}
    inputs = generate_inputs(axes, 0, device, "rowscale")
    out = torch.empty((axes["M"], axes["N"]), dtype=torch.bfloat16, device=device)
    try:
        _scaled_mm_blockwise(inputs["A"], inputs["B"], inputs["scale_a"], inputs["scale_b"], out)
    except (RuntimeError, ValueError, TypeError, NotImplementedError):
        return False
    ref = reference(inputs, axes)["C"]
    allowed = get_problem("fp8_blockscaled_gemm").tolerance_for("C").allowed_error(ref)
    return bool(((out.double() - ref).abs() <= allowed).all())


def _blockwise_available(device: torch.device) -> bool:
    if device.type != "cuda" or torch.cuda.get_device_capability(device) < (9, 0):
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _BLOCKWISE_WORKS:
        _BLOCKWISE_WORKS[index] = _probe(device)
    return _BLOCKWISE_WORKS[index]


def baseline(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    if _blockwise_available(A.device):
        key = (A.device.index or 0, A.shape[0], B.shape[0], A.shape[1])
        if key not in _BLOCKWISE_REFUSED:
            try:
                _scaled_mm_blockwise(A, B, scale_a, scale_b, C)
                return
            except (RuntimeError, ValueError):
                _BLOCKWISE_REFUSED.add(key)
    a = dequantise(A, scale_a, 1, torch.float16)
    b = dequantise(B, scale_b, BLOCK, torch.float16)
    C.copy_(torch.matmul(a, b.t()))
