"""fp8_blockscaled_gemm inputs, reference (fp64) and baseline.

C[m, n] = sum_k A[m, k] * scale_a[m, k // 128] * B[n, k] * scale_b[n // 128, k // 128]: A (M, K)
and B (N, K) e4m3, scale_a (M, K/128) and scale_b (N/128, K/128) fp32 (the dequantisation
factors, DeepSeek-V3's `scale_inv`), C (M, N) bf16.

Baseline: cuBLASLt's block-scaled fp8 GEMM (1x128 activation and 128x128 weight scale modes)
through torch._scaled_mm_v2, where a probe on the device, at a small shape of the call's alignment
class, finds it running and agreeing with the reference: torch 2.11 allows this recipe on sm_90
only (compute capability 9.x, NotImplementedError elsewhere) and needs cuBLASLt >= 12.9 (CUDA
builds >= 12.9; the CPU build has no kernel). A torch without _scaled_mm_v2 gets torch._scaled_mm,
and only where K/128 is a multiple of 4 (see _scaled_mm_blockwise). Otherwise the operands are
dequantised to fp16 in eager torch and multiplied with torch.matmul.
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


def _recipe(name: str) -> int:
    """The int torch._scaled_mm_v2 takes for a ScalingType: torch.nn.functional.ScalingType is
    torch._C._ScalingType, at::blas::ScalingType (BlockWise1x128 = 4, BlockWise128x128 = 5)."""
    return int(getattr(torch.nn.functional.ScalingType, name).value)


def _scaled_mm_blockwise(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    """cuBLASLt's 1x128 x 128x128 recipe (scale modes VEC128_32F and BLK128x128_32F) through
    torch._scaled_mm_v2(A, B.t(), ...), in the layouts torch 2.11 checks for BlockWise1x128 x
    BlockWise128x128 (ScaledBlas.cpp's _scaled_block1x128_block128x128, _meta_registrations.py's
    is_1x128_128x128), L4 being K/128 rounded up to a multiple of 4:
    - scale_a (M, K/128), strides (1, M): M-major (outer-dim-major);
    - scale_b (L4, N/128), strides (1, L4): the transpose of a row-major (N/128, L4) tensor whose
      rows are the weight's K-block scales padded to 16 bytes, as cuBLASLt reads them.
    torch._scaled_mm (v1) accepts the 128x128 scales only unpadded (scale_b.t() with strides
    (1, K/128)), which cuBLASLt misreads where K/128 is not a multiple of 4 (the rows after the
    first start at the wrong place): it is used only on a torch without _scaled_mm_v2, and there
    only where K/128 is a multiple of 4."""
    k_blocks = A.shape[1] // BLOCK
    scale_a_m_major = scale_a.t().contiguous().t()
    scale_b_rows = scale_b.contiguous()
    if hasattr(torch, "_scaled_mm_v2"):
        padded = -(-k_blocks // 4) * 4
        if padded != k_blocks:
            scale_b_rows = scale_b.new_zeros((scale_b.shape[0], padded))
            scale_b_rows[:, :k_blocks] = scale_b
        torch._scaled_mm_v2(
            A,
            B.t(),
            [scale_a_m_major],
            [_recipe("BlockWise1x128")],
            [],
            [scale_b_rows.t()],
            [_recipe("BlockWise128x128")],
            [],
            None,
            torch.bfloat16,
            [],
            False,
            out=C,
        )
        return
    if k_blocks % 4:
        raise ValueError(f"torch._scaled_mm misreads unpadded 128x128 scales at K/128 = {k_blocks}")
    torch._scaled_mm(
        A, B.t(), scale_a=scale_a_m_major, scale_b=scale_b_rows.t(), out_dtype=torch.bfloat16, out=C
    )


#: Per (CUDA device, probe shape): does the block-scaled GEMM run and agree with the reference?
_BLOCKWISE_WORKS: dict[tuple[int, int, int, int], bool] = {}
#: (device, M, N, K) at which it raised although its probe passed: dequantise there.
_BLOCKWISE_REFUSED: set[tuple[int, int, int, int]] = set()


def _probe_shape(m: int, n: int, k: int) -> tuple[int, int, int]:
    """A small (M, N, K) of the same alignment class as the call: M itself up to 256, else 256 plus
    M's remainder mod 128; N itself up to 256, else 256 or 384 (N/128 odd or even); K/128 itself up
    to 8, else 4 plus its remainder mod 4 (the padding of the 128x128 scales' rows). M % 4 is the
    1x128 scales' leading dimension in floats, K/128 % 4 the 128x128 scales' padding, and N/128 = 1
    a one-wide scale tensor: the cases in which a layout could be misread."""
    k_blocks = k // BLOCK
    probe_m = m if m <= 256 else 256 + m % 128
    probe_n = n if n <= 256 else 256 + n % 256
    probe_k_blocks = k_blocks if k_blocks <= 8 else 4 + k_blocks % 4
    return probe_m, probe_n, probe_k_blocks * BLOCK


def _probe(device: torch.device, m: int, n: int, k: int) -> bool:
    """One small block-scaled GEMM with scales that differ per row and block (`rowscale`), checked
    element by element against the fp64 reference: a scale layout misread fails it."""
    axes = {"M": m, "N": n, "K": k}
    inputs = generate_inputs(axes, 0, device, "rowscale")
    out = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    try:
        _scaled_mm_blockwise(inputs["A"], inputs["B"], inputs["scale_a"], inputs["scale_b"], out)
    except (RuntimeError, ValueError, TypeError, AttributeError):
        return False
    ref = reference(inputs, axes)["C"]
    allowed = get_problem("fp8_blockscaled_gemm").tolerance_for("C").allowed_error(ref)
    return bool(((out.double() - ref).abs() <= allowed).all())


def _blockwise_available(device: torch.device, m: int, n: int, k: int) -> bool:
    if device.type != "cuda" or torch.cuda.get_device_capability(device) < (9, 0):
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, *_probe_shape(m, n, k))
    if key not in _BLOCKWISE_WORKS:
        _BLOCKWISE_WORKS[key] = _probe(device, *key[1:])
    return _BLOCKWISE_WORKS[key]


def baseline(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    if _blockwise_available(A.device, A.shape[0], B.shape[0], A.shape[1]):
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
