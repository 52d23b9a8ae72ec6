"""w4a16_gemm inputs, reference (fp64) and baseline (tinygemm at M <= 16 on CUDA, else dequantise in
eager torch, then cuBLAS).

Packing: qweight (N, K/8) int32; bits 4j..4j+3 of qweight[n, i] hold the weight of column
k = 8i + j, as an unsigned nibble q in 0..15 (GPTQ's order along K, no AWQ interleave). The weight
is w[n, k] = (q - 8) * scales[n, k // 128]: symmetric int4 with the fixed zero point 8 (GPTQ's
sym=True).
"""

from __future__ import annotations

import torch

from evaluator.problems._sampling import tn_gemm_operands
from evaluator.problems.w4a16_gemm.counts import GROUP, PACK

#: The fixed zero point: a stored nibble q means the integer q - ZERO in -8..7.
ZERO = 8
#: The largest magnitude a group's scale maps its largest weight to.
QMAX = 7
SHIFTS = tuple(4 * j for j in range(PACK))


def quantise(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Nibbles q (N, K) int64 in 0..15 and bf16 scales (N, K/128): scale = amax(|group|) / 7,
    rounded to bf16 first, so that q is the nearest integer to w / scale (clamped to -8..7)."""
    n, k = w.shape
    groups = w.view(n, k // GROUP, GROUP)
    scales = (groups.abs().amax(dim=-1) / QMAX).clamp_min(1e-30).to(torch.bfloat16)
    q = torch.round(groups / scales.float()[..., None]).clamp_(-ZERO, QMAX).add_(ZERO)
    return q.view(n, k).long(), scales


def pack(q: torch.Tensor) -> torch.Tensor:
    """(N, K) nibbles -> (N, K/8) int32, column 8i + j in bits 4j..4j+3 of word i."""
    n, k = q.shape
    shifts = torch.tensor(SHIFTS, dtype=torch.int64, device=q.device)
    words = (q.view(n, k // PACK, PACK) << shifts).sum(dim=-1)  # 0 .. 2^32 - 1
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack(qweight: torch.Tensor) -> torch.Tensor:
    """(N, K/8) int32 -> (N, K) int64 nibbles in 0..15. The mask also drops the sign extension of
    an arithmetic shift of a negative word."""
    n, words = qweight.shape
    shifts = torch.tensor(SHIFTS, dtype=torch.int64, device=qweight.device)
    return ((qweight.long()[..., None] >> shifts) & 0xF).view(n, words * PACK)


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    """x plays the GEMM's A, the quantised W its B (N rows of K, drawn at scale 1/sqrt(K))."""
    if axes["K"] % GROUP:
        raise ValueError(f"K={axes['K']} must be a multiple of the group size {GROUP}")
    x, w = tn_gemm_operands("w4a16_gemm", axes, seed, device, distribution)
    q, scales = quantise(w)
    return {"x": x.to(torch.bfloat16), "qweight": pack(q), "scales": scales}


def dequantise_fp64(qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    n = qweight.shape[0]
    q = (unpack(qweight) - ZERO).double().view(n, -1, GROUP)
    return (q * scales.double()[..., None]).view(n, -1)


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """In fp64, from the exact dequantised weights (a 4-bit integer times a bf16 scale)."""
    return {"y": inputs["x"].double() @ dequantise_fp64(inputs["qweight"], inputs["scales"]).t()}


def error_scale(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """sqrt(sum_k (x[m,k] w[n,k])^2) per output (atol_scale "inputs"): a bf16 tensor-core kernel
    rounds every dequantised weight to bf16, an error relative to each product, not to y, which
    can cancel to ~0 while its products do not. A scale, so fp32 is precise enough (one GEMM)."""
    w = dequantise_fp64(inputs["qweight"], inputs["scales"]).float()
    return {"y": (inputs["x"].float().square() @ w.square().t()).sqrt()}


#: Up to this many rows of x, torch's int4 weight-only GEMM beats dequantise + cuBLAS on the H200
#: (M = 1 and 16: 3-4.5x faster; M = 128: 0.86x; docs/problems.md, w4a16_gemm).
TINYGEMM_MAX_M = 16
#: tinygemm's k-tiles of 16 packed together (16-byte loads): K a multiple of 128, N of 8.
TINYGEMM_INNER_K_TILES = 8
#: tinygemm's fixed offset: it dequantises a nibble q as (q - 8) * scale + zero.
TINYGEMM_OFFSET = 8
#: Devices where tinygemm refused once (not built for this GPU): not tried again.
_TINYGEMM_REFUSED: set[int] = set()


def baseline(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> None:
    """What a user reaches for: at decode sizes (M <= 16, CUDA) torch's int4 weight-only GEMM
    (tinygemm, the kernel behind torchao's int4 weight-only path), repacked in every call since the
    problem's layout is not its own; elsewhere, and where tinygemm refuses, `dequantise_and_matmul`
    (version 2's baseline at every M)."""
    if (
        x.is_cuda
        and x.shape[0] <= TINYGEMM_MAX_M
        and qweight.shape[0] % 8 == 0
        and _tinygemm(x, qweight, scales, y)
    ):
        return
    dequantise_and_matmul(x, qweight, scales, y)


def _tinygemm(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> bool:
    if x.device.index in _TINYGEMM_REFUSED:
        return False
    try:
        packed = torch._convert_weight_to_int4pack(tinygemm_nibbles(qweight), TINYGEMM_INNER_K_TILES)
        y.copy_(torch._weight_int4pack_mm(x, packed, GROUP, tinygemm_scales_and_zeros(scales)))
    except RuntimeError:  # also "not implemented" (no kernel built for this GPU): a subclass
        _TINYGEMM_REFUSED.add(x.device.index)
        return False
    return True


def tinygemm_nibbles(qweight: torch.Tensor) -> torch.Tensor:
    """The (N, K/2) uint8 weights `torch._convert_weight_to_int4pack` takes on CUDA: column 2b in
    the high nibble of byte b, 2b + 1 in the low one (int4mm.cu's repack). The problem's words,
    read as little-endian bytes, hold 2b in the low nibble: a swap."""
    nibbles = qweight.view(torch.uint8)
    return (nibbles << 4) | (nibbles >> 4)


def tinygemm_scales_and_zeros(scales: torch.Tensor) -> torch.Tensor:
    """The (K/128, N, 2) bf16 table `_weight_int4pack_mm` takes, [g, n] = (scale, zero): tinygemm's
    (q - 8) * scale + zero is the problem's (q - ZERO) * scale for zero = (8 - ZERO) * scale (0)."""
    scales_t = scales.t()
    return torch.stack((scales_t, scales_t * (TINYGEMM_OFFSET - ZERO)), dim=-1).contiguous()


def dequantise_and_matmul(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor
) -> None:
    """What a user writes without a kernel: unpack the nibbles byte-wise (a byte of the
    little-endian word i holds columns 8i + 2b and 8i + 2b + 1), dequantise to bf16 (one rounding
    of (q - 8) * scale), then cuBLAS."""
    n = qweight.shape[0]
    nibbles = qweight.view(torch.uint8)  # (N, K/2)
    q = torch.stack((nibbles & 0xF, nibbles >> 4), dim=-1).view(n, -1, GROUP)
    w = q.to(torch.bfloat16).sub_(ZERO).mul_(scales[..., None]).view(n, -1)
    torch.matmul(x, w.t(), out=y)
