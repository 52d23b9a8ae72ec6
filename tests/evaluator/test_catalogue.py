"""The problem catalogue: metadata, exact counts, deterministic inputs, and tolerances that pass the
baseline with margin while failing a kernel that computes in a lower precision than allowed.

Runs on the CPU: only the shapes flagged ``cpu`` are computed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from evaluator.commands.problems_cmd import catalogue_markdown
from evaluator.harness.correctness import allocate_outputs
from evaluator.harness.work import error_scales
from evaluator.problems import OutputTolerance, Problem, Shape, get_problem, load_catalogue
from evaluator.problems.grouped_gemm_bf16.counts import empty_groups

REPO = Path(__file__).resolve().parents[2]
#: Single-GPU problems; the multi-GPU ones (other contract) are in test_multi_problems.py.
#: Native problems only: an imported one (docs/importing.md) has no example or lower-precision kernel here.
NATIVE = {name: problem for name, problem in load_catalogue().items() if not problem.imported}
PROBLEMS = sorted(name for name, problem in NATIVE.items() if problem.kind == "single")
EXPECTED = {
    "vector_add", "gemm_bf16", "gemm_fp8", "grouped_gemm_bf16", "rmsnorm", "softmax", "swiglu",
    "attention_fwd", "attention_bwd", "layernorm", "rope", "gemv_bf16", "prefix_sum", "cross_entropy",
    "silu_and_mul", "gelu_and_mul", "fp8_quant_per_token", "fp8_quant_per_block", "transpose", "w4a16_gemm",
    "fp8_blockscaled_gemm", "moe_router_topk", "moe_permute", "paged_decode_attention", "selective_scan",
    "histogram", "sort_keys", "moe_unpermute", "top_p_sampling", "mla_decode", "moe_gemm_swiglu",
    "reduction_sum", "top_k_sampling",
}  # fmt: skip
Kernel = Callable[..., None]


# ---------------------------------------------------------------- helpers


def allowed_error(
    ref: torch.Tensor, problem: Problem, name: str, scale: torch.Tensor | None = None
) -> torch.Tensor:
    """atol + rtol*|ref| per element, atol scaled as the problem's ``atol_scale`` says (``scale``:
    the reference module's error scale of this output, for ``inputs``)."""
    return problem.tolerance_for(name).allowed_error(ref.double(), None if scale is None else scale.double())


def matched_ratio(out: torch.Tensor, ref: torch.Tensor, problem: Problem, name: str,
                  scale: torch.Tensor | None = None) -> float:
    """Fraction of elements with |out - ref| <= atol + rtol*|ref|; a NaN/Inf never matches."""
    allowed = allowed_error(ref, problem, name, scale)
    out, ref = out.double(), ref.double()
    ok = torch.isfinite(out) & ((out - ref).abs() <= allowed)
    return ok.double().mean().item()


def worst_margin(out: torch.Tensor, ref: torch.Tensor, problem: Problem, name: str,
                 scale: torch.Tensor | None = None) -> float:
    """Largest |out - ref| / (atol + rtol*|ref|): below 1 passes, lower means more margin."""
    out, ref = out.double(), ref.double()
    return ((out - ref).abs() / allowed_error(ref, problem, name, scale)).max().item()


def run_kernel(problem: Problem, kernel: Kernel, shape: Shape, seed: int, distribution: str) -> tuple:
    """Call ``kernel`` the submission's way (inputs, then NaN-poisoned outputs, in order): the
    outputs, the reference and the error scales (``atol_scale = "inputs"``) of these inputs."""
    module = problem.reference_module()
    inputs = module.generate_inputs(shape.axes, seed, "cpu", distribution)
    scales = error_scales(problem, module, inputs, shape.axes)  # before the kernel can touch the inputs
    outputs = allocate_outputs(problem.outputs, shape.axes, "cpu")  # NaN, or a sentinel in integer outputs
    kernel(
        *[inputs[spec.name] for spec in problem.inputs], *outputs.values(), **problem.call_kwargs(shape.axes)
    )
    return outputs, module.reference(inputs, shape.axes), scales


def failed_outputs(
    problem: Problem, outputs: dict[str, torch.Tensor], reference: dict[str, torch.Tensor],
    scales: dict[str, torch.Tensor] | None = None,
) -> list[str]:
    """The outputs whose fraction of elements within tolerance is below the problem's requirement."""
    scales = scales or {}
    return [
        output
        for output, ref in reference.items()
        if matched_ratio(outputs[output], ref, problem, output, scales.get(output))
        < problem.tolerance_for(output).matched_ratio
    ]


def cpu_cases(problem: Problem) -> list[tuple[Shape, int, str]]:
    return [
        (shape, seed, distribution)
        for shape in problem.select_shapes("all", device="cpu")
        for seed in problem.test_seeds[:2]
        for distribution in problem.distributions
    ]


def load_example(name: str) -> ModuleType:
    path = REPO / "examples" / "python" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- lower-precision kernels
# Each computes the right thing in a precision the problem does not allow; each must fail.

FP8 = torch.float8_e4m3fn


def fp8(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to(FP8).float()


def vector_add_in_fp16(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    c.copy_(a.half() + b.half())


def gemm_bf16_from_fp8_inputs(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    C.copy_(fp8(A) @ fp8(B).t())


def gemm_fp8_from_e5m2_inputs(
    A: torch.Tensor, B: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, C: torch.Tensor
) -> None:
    e5m2 = torch.float8_e5m2
    C.copy_((A.float().to(e5m2).float() * sa) @ (B.float().to(e5m2).float() * sb).t())


def gemv_bf16_from_fp8_weights(x: torch.Tensor, W: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(x.float() @ fp8(W).t())


def prefix_sum_in_bf16(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(torch.cumsum(x.bfloat16(), dim=-1))


def grouped_gemm_with_fp8_weights(
    X: torch.Tensor, W: torch.Tensor, offsets: torch.Tensor, Y: torch.Tensor
) -> None:
    bounds = offsets.tolist()
    for group in range(W.shape[0]):
        Y[bounds[group] : bounds[group + 1]] = (
            X[bounds[group] : bounds[group + 1]].float() @ fp8(W[group]).t()
        )


def rmsnorm_of_an_fp8_hidden_state(
    x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, y: torch.Tensor, r_out: torch.Tensor
) -> None:
    h = x.float() + r.float()
    r_out.copy_(h)
    h = fp8(h)
    y.copy_(h * torch.rsqrt(h.square().mean(-1, keepdim=True) + 1e-6) * w.float())


def layernorm_of_an_fp8_input(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(torch.nn.functional.layer_norm(fp8(x), (x.shape[-1],), w.float(), b.float(), 1e-5))


def rope_in_bf16_arithmetic(*tensors: torch.Tensor) -> None:
    """Hugging Face's way: the tables cast to bf16, so every product and sum is rounded to bf16."""
    q, k, cos, sin, q_out, k_out = tensors
    get_problem("rope").reference_module().baseline(q, k, cos.bfloat16(), sin.bfloat16(), q_out, k_out)


def softmax_with_fp8_exponentials(x: torch.Tensor, y: torch.Tensor) -> None:
    e = fp8(torch.exp(x.float() - x.float().amax(-1, keepdim=True)))
    y.copy_(e / e.sum(-1, keepdim=True))


def swiglu_with_fp8_weights(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor, out: torch.Tensor) -> None:
    h1, h3 = x.float() @ fp8(W1).t(), x.float() @ fp8(W3).t()
    out.copy_(torch.nn.functional.silu(h1) * h3)


def attention_fwd_with_fp8_values(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    load_example("attention_fwd").kernel(q, k, v.to(FP8).to(v.dtype), o, LSE, causal=causal)


def attention_bwd_with_fp8_gradients(*tensors: torch.Tensor, causal: int) -> None:
    q, k, v, o, d_out, lse, dq, dk, dv = tensors
    load_example("attention_bwd").kernel(
        q, k, v, o, d_out.to(FP8).to(d_out.dtype), lse, dq, dk, dv, causal=causal
    )


def cross_entropy_of_bf16_log_probabilities(
    logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor
) -> None:
    """F.cross_entropy on the bf16 logits: its log_softmax rounds every log-probability to bf16."""
    loss.copy_(torch.nn.functional.cross_entropy(logits, target, reduction="none"))


def silu_and_mul_of_fp8_inputs(x: torch.Tensor, y: torch.Tensor) -> None:
    gate, up = fp8(x).chunk(2, dim=-1)
    y.copy_(torch.nn.functional.silu(gate) * up)


def gelu_and_mul_of_fp8_inputs(x: torch.Tensor, y: torch.Tensor) -> None:
    gate, up = fp8(x).chunk(2, dim=-1)
    y.copy_(torch.nn.functional.gelu(gate, approximate="tanh") * up)


def fp8_quant_rounded_to_e5m2(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """The right scales, but x / scale rounded to e5m2 (2 mantissa bits), then stored as e4m3."""
    t, h = x.shape
    group = h // scale.shape[1] if scale.shape[1] > 1 else h
    values = x.float().view(t, h // group, group)
    scales = values.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4) / 448.0
    scale.copy_(scales.view(scale.shape))
    q.view(t, h // group, group).copy_((values / scales).to(torch.float8_e5m2))


def transpose_through_fp8(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(fp8(x).t())


def w4a16_with_fp8_activations(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor
) -> None:
    """W4A8: the right int4 weights against activations rounded to e4m3."""
    w = get_problem("w4a16_gemm").reference_module().dequantise_fp64(qweight, scales).float()
    y.copy_(fp8(x) @ w.t())


def fp8_blockscaled_from_e5m2_operands(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    reference = get_problem("fp8_blockscaled_gemm").reference_module()
    e5m2 = torch.float8_e5m2
    a = reference.dequantise(A.float().to(e5m2), scale_a, 1, torch.float32)
    b = reference.dequantise(B.float().to(e5m2), scale_b, reference.BLOCK, torch.float32)
    C.copy_(a @ b.t())


def moe_router_with_a_bf16_softmax(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> None:
    values, top = torch.topk(logits, ids.shape[1], dim=-1)
    weights.copy_(torch.softmax(values.bfloat16(), dim=-1))
    ids.copy_(top)


def moe_permute_through_fp8(*tensors: torch.Tensor) -> None:
    hidden, topk_ids, permuted, offsets, dest_rows = tensors
    get_problem("moe_permute").reference_module().baseline(hidden, topk_ids, permuted, offsets, dest_rows)
    permuted.copy_(fp8(permuted))


def paged_decode_with_fp8_values(*tensors: torch.Tensor) -> None:
    q, k_cache, v_cache, block_table, seq_lens, out = tensors
    v = v_cache.to(FP8).to(v_cache.dtype)
    load_example("paged_decode_attention").kernel(q, k_cache, v, block_table, seq_lens, out)


def selective_scan_of_fp8_inputs(*tensors: torch.Tensor) -> None:
    x, dt, A, Bm, Cm, y = tensors
    x, Bm, Cm = (t.to(FP8).to(t.dtype) for t in (x, Bm, Cm))
    load_example("selective_scan").kernel(x, dt, A, Bm, Cm, y)


def histogram_counted_in_bf16(x: torch.Tensor, counts: torch.Tensor) -> None:
    """Counters in bf16: exact only to 256, then adding 1 rounds away (every CPU case has a bin above 256)."""
    tally = torch.zeros(counts.shape, dtype=torch.bfloat16)
    counts.copy_(tally.scatter_add_(0, x.long(), torch.ones(x.shape, dtype=torch.bfloat16)))


def sort_keys_through_fp32(x: torch.Tensor, y: torch.Tensor) -> None:
    """Keys sorted as fp32: those beyond 2^24 in magnitude come back rounded."""
    y.copy_(torch.sort(x.float(), dim=-1).values.to(torch.int64))


def moe_unpermute_of_fp8_rows(
    expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_weights: torch.Tensor, out: torch.Tensor
) -> None:
    """The expert rows read through fp8 (2^-4 relative), the rest in fp32."""
    rows = fp8(expert_out)[dest_rows.long()]
    out.copy_((topk_weights[..., None] * rows).sum(dim=1))


def top_p_sampling_of_bf16_logits(
    logits: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor, token: torch.Tensor
) -> None:
    """The baseline's algorithm on logits rounded to bf16 (probabilities off by ~2^-9 relative)."""
    from evaluator.problems.top_p_sampling.reference import baseline

    baseline(logits.bfloat16().float(), top_p, u, token)


def top_k_sampling_in_bf16(logits: torch.Tensor, top_k: torch.Tensor, u: torch.Tensor, token: torch.Tensor,
                           K: int) -> None:
    """The baseline's algorithm in bf16 throughout: the logits, the softmax, the cumulative sum and u
    (bf16 logits alone, with an fp32 softmax, picked the same tokens in one of the 18 CPU cases)."""
    from evaluator.problems.top_k_sampling.reference import baseline

    baseline(logits.bfloat16(), top_k, u.bfloat16(), token, K)


def mla_decode_with_fp8_latent_values(
    q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """fp32 scores, but the latent values read through fp8 (2^-4 relative)."""
    for row, length in enumerate(seq_lens.tolist()):
        cache = kv[row, :length].float()
        probs = torch.softmax(q[row].float() @ cache.t() / 192**0.5, dim=-1)
        out[row] = probs @ fp8(cache[:, :512])


def moe_gemm_swiglu_with_fp8_weights(
    X: torch.Tensor, W13: torch.Tensor, group_offsets: torch.Tensor, Y: torch.Tensor
) -> None:
    """The right computation in fp32, on expert weights rounded to fp8 (2^-4 relative)."""
    width, offsets = Y.shape[1], group_offsets.tolist()
    for expert in range(W13.shape[0]):
        start, end = offsets[expert], offsets[expert + 1]
        h = X[start:end].float() @ fp8(W13[expert]).t()
        Y[start:end] = torch.nn.functional.silu(h[:, :width]) * h[:, width:]


def reduction_sum_by_a_bf16_tree(x: torch.Tensor, y: torch.Tensor) -> None:
    """A pairwise tree whose partial sums are kept in bf16 (accumulating in the input's type)."""
    partial = x.bfloat16()
    while partial.shape[-1] > 1:
        if partial.shape[-1] % 2:
            partial = torch.nn.functional.pad(partial, (0, 1))
        partial = (partial[..., 0::2].float() + partial[..., 1::2].float()).bfloat16()
    y.copy_(partial[..., 0])


LOWER_PRECISION: dict[str, Kernel] = {
    "vector_add": vector_add_in_fp16,
    "gemm_bf16": gemm_bf16_from_fp8_inputs,
    "gemm_fp8": gemm_fp8_from_e5m2_inputs,
    "gemv_bf16": gemv_bf16_from_fp8_weights,
    "prefix_sum": prefix_sum_in_bf16,
    "grouped_gemm_bf16": grouped_gemm_with_fp8_weights,
    "rmsnorm": rmsnorm_of_an_fp8_hidden_state,
    "layernorm": layernorm_of_an_fp8_input,
    "rope": rope_in_bf16_arithmetic,
    "softmax": softmax_with_fp8_exponentials,
    "swiglu": swiglu_with_fp8_weights,
    "attention_fwd": attention_fwd_with_fp8_values,
    "attention_bwd": attention_bwd_with_fp8_gradients,
    "w4a16_gemm": w4a16_with_fp8_activations,
    "fp8_blockscaled_gemm": fp8_blockscaled_from_e5m2_operands,
    "moe_router_topk": moe_router_with_a_bf16_softmax,
    "moe_permute": moe_permute_through_fp8,
    "paged_decode_attention": paged_decode_with_fp8_values,
    "selective_scan": selective_scan_of_fp8_inputs,
    "cross_entropy": cross_entropy_of_bf16_log_probabilities,
    "silu_and_mul": silu_and_mul_of_fp8_inputs,
    "gelu_and_mul": gelu_and_mul_of_fp8_inputs,
    "fp8_quant_per_token": fp8_quant_rounded_to_e5m2,
    "fp8_quant_per_block": fp8_quant_rounded_to_e5m2,
    "transpose": transpose_through_fp8,
    "histogram": histogram_counted_in_bf16,
    "sort_keys": sort_keys_through_fp32,
    "moe_unpermute": moe_unpermute_of_fp8_rows,
    "top_p_sampling": top_p_sampling_of_bf16_logits,
    "top_k_sampling": top_k_sampling_in_bf16,
    "mla_decode": mla_decode_with_fp8_latent_values,
    "moe_gemm_swiglu": moe_gemm_swiglu_with_fp8_weights,
    "reduction_sum": reduction_sum_by_a_bf16_tree,
}


def scaled_mm_cpu_reason() -> str | None:
    """torch._scaled_mm has no CPU kernel in some builds; then the fp8 example cannot run here."""
    try:
        one = torch.ones(16, 16).to(FP8)
        torch._scaled_mm(one, one.t(), scale_a=torch.ones(1), scale_b=torch.ones(1), out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, AttributeError) as error:
        return f"torch._scaled_mm does not run on this CPU build: {error}"
    return None


#: Examples that cannot run on a CPU build of torch: name -> function giving the reason (or None).
CPU_UNSUPPORTED: dict[str, Callable[[], str | None]] = {"gemm_fp8": scaled_mm_cpu_reason}


# ---------------------------------------------------------------- counts (hand-computed)


@pytest.mark.parametrize(
    "name, axes, flops, nbytes",
    [
        # 1 add per element; a, b read and c written, 4 bytes each
        ("vector_add", {"N": 2**24}, {"fp32_simt": 16_777_216}, 201_326_592),
        # 2*128*7168*5120; 2*(128*5120 + 7168*5120 + 128*7168)
        ("gemm_bf16", {"M": 128, "N": 7168, "K": 5120}, {"bf16_tensor": 9_395_240_960}, 76_546_048),
        # same flops; 1-byte A and B, bf16 C, two fp32 scales
        ("gemm_fp8", {"M": 128, "N": 7168, "K": 5120}, {"fp8_tensor": 9_395_240_960}, 39_190_536),
        # 2*B*N*K; 2*(B*K + N*K + B*N): the weight dominates
        ("gemv_bf16", {"B": 1, "N": 10240, "K": 8192}, {"bf16_tensor": 167_772_160}, 167_809_024),
        # N - 1 adds per row (the first output is a copy); x read and y written, 4 bytes each
        ("prefix_sum", {"R": 1, "N": 2**24}, {"fp32_simt": 16_777_215}, 134_217_728),
        # 2*T*N*K; X, the 7 non-empty experts' weights (G // 8 = 1 empty), Y, 9 int32 offsets
        (
            "grouped_gemm_bf16",
            {"T": 8192, "G": 8, "N": 4096, "K": 7168},
            {"bf16_tensor": 481_036_337_152},
            595_591_204,
        ),
        # 5 per element + 3 per row; x, residual, y, residual_out (T*H each) and weight (H), bf16
        ("rmsnorm", {"T": 2048, "H": 4096}, {"fp32_simt": 41_949_184}, 67_117_056),
        # 5 per element; x read, y written, bf16
        ("softmax", {"R": 4096, "C": 4096}, {"fp32_simt": 83_886_080}, 67_108_864),
        # 7 per element + 4 per row; x and y (T*H each), weight and bias (H each), bf16
        ("layernorm", {"T": 2048, "H": 4096}, {"fp32_simt": 58_728_448}, 33_570_816),
        # 3 per output element, T*(Hq+Hk)*128 of them; q, k, q_out, k_out bf16, cos and sin (T*64) fp32
        ("rope", {"T": 2048, "Hq": 64, "Hk": 8}, {"fp32_simt": 56_623_104}, 76_546_048),
        # two GEMMs 4*T*F*D, gate 5*T*F; x, W1, W3, out in bf16
        (
            "swiglu",
            {"T": 128, "D": 4096, "F": 14336},
            {"bf16_tensor": 30_064_771_072, "fp32_simt": 9_175_040},
            239_599_616,
        ),
        # causal: 4*D*B*H * S(S+1)/2 = 32768 * 8_390_656; q, k, v, O in bf16 and LSE in fp32
        (
            "attention_fwd",
            {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 1},
            {"bf16_tensor": 274_945_015_808},
            269_484_032,
        ),
        (
            "attention_fwd",
            {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 0},
            {"bf16_tensor": 549_755_813_888},
            269_484_032,
        ),
        # 2.5x the forward; q, k, v, o, dO, dq, dk, dv in bf16 and lse in fp32
        (
            "attention_bwd",
            {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 1},
            {"bf16_tensor": 687_362_539_520},
            537_919_488,
        ),
        # 4 per logit + 2 per token; logits bf16 (2TV), targets int64 and losses fp32 (12T)
        ("cross_entropy", {"T": 1024, "V": 128256}, {"fp32_simt": 525_338_624}, 262_680_576),
        # 5 per output (T*I); x (T, 2I) read and y (T, I) written, bf16: 6TI
        ("silu_and_mul", {"T": 2048, "I": 28672}, {"fp32_simt": 293_601_280}, 352_321_536),
        # 10 per output (the tanh form as written); bytes as silu_and_mul
        ("gelu_and_mul", {"T": 2048, "I": 36864}, {"fp32_simt": 754_974_720}, 452_984_832),
        # 2 per element (max, divide) + 2 per row; x bf16, q 1 byte, one fp32 scale per row
        ("fp8_quant_per_token", {"T": 2048, "H": 8192}, {"fp32_simt": 33_558_528}, 50_339_840),
        # 2 per element + 2 per group of 128 (4096 * 56 groups); one fp32 scale per group
        ("fp8_quant_per_block", {"T": 4096, "H": 7168}, {"fp32_simt": 59_179_008}, 88_997_888),
        # no arithmetic: no flop class at all; x read and out written, bf16
        ("transpose", {"M": 4096, "N": 7168}, {}, 117_440_512),
        # no flops; x (N) read and counts (B) written, int32: 4 * (2^24 + 256)
        ("histogram", {"N": 16_777_216, "B": 256}, {}, 67_109_888),
        # no flops; x read and y written, int32: 8 * 64 * 128256
        ("sort_keys", {"R": 64, "N": 128_256}, {}, 65_667_072),
        # (2K - 1) per output element; T*K expert rows and the (T, H) output in bf16, ids and weights 4 bytes
        ("moe_unpermute", {"T": 4096, "H": 7168, "E": 256, "K": 8}, {"fp32_simt": 440_401_920}, 528_744_448),
        # 3 per logit (minus the max, exp, add); logits, top_p and u fp32 read, tokens int32 written
        ("top_p_sampling", {"B": 64, "V": 151_936}, {"fp32_simt": 29_171_712}, 38_896_384),
        # no flops (selection; the candidates' exps depend on the inputs); logits, u fp32 and top_k int32
        # read, tokens int32 written
        ("top_k_sampling", {"B": 64, "V": 151_936, "K": 20}, {}, 38_896_384),
        # 2HT(576 + 512) tensor flops; q, the T cached latents and out in bf16, seq_lens int32
        (
            "mla_decode",
            {"B": 64, "H": 128, "S": 8192, "T": 262_144},
            {"bf16_tensor": 73_014_444_032},
            319_815_936,
        ),
        # 2 * 2TIK tensor + 5TI SIMT; X, the 7 non-empty experts' W13 (G // 8 = 1 empty), Y, 9 int32 offsets
        (
            "moe_gemm_swiglu",
            {"T": 8192, "G": 8, "I": 2048, "K": 7168},
            {"bf16_tensor": 481_036_337_152, "fp32_simt": 83_886_080},
            562_036_772,
        ),
        # N - 1 adds per row; x read and y written, 4 bytes each
        ("reduction_sum", {"R": 1, "N": 16_777_216}, {"fp32_simt": 16_777_215}, 67_108_868),
        # 2*M*N*K; x (2MK) and y (2MN) bf16, packed weights N*K/2, bf16 scales 2*N*K/128
        ("w4a16_gemm", {"M": 16, "N": 10240, "K": 8192}, {"bf16_tensor": 2_684_354_560}, 43_843_584),
        # 2*M*N*K fp8 + one fma per output and K block; A, B 1 byte, C bf16, fp32 scales (128 + 32) * 56
        (
            "fp8_blockscaled_gemm",
            {"M": 128, "N": 4096, "K": 7168},
            {"fp8_tensor": 7_516_192_768, "fp32_simt": 58_720_256},
            31_362_048,
        ),
        # 4K - 1 per token (softmax of the K selected); logits read, weights and ids written, 4 bytes each
        ("moe_router_topk", {"T": 16384, "E": 256, "K": 8}, {"fp32_simt": 507_904}, 17_825_792),
        # no arithmetic; hidden read once, T*K rows written (bf16), ids, dest_rows and E+1 offsets (int32)
        ("moe_permute", {"T": 4096, "H": 7168, "E": 256, "K": 8}, {}, 528_745_476),
        # 4*Hq*D per cached token; K and V of the T tokens, q and out (bf16), block table and seq_lens
        (
            "paged_decode_attention",
            {"B": 16, "Hq": 64, "Hkv": 8, "S": 4096, "T": 32768, "NB": 2080},
            {"bf16_tensor": 1_073_741_824},
            134_758_464,
        ),
        # the chunked SSD's GEMMs and element-wise work (counts.py); x, y, Bm, Cm bf16, dt and A fp32
        (
            "selective_scan",
            {"B": 4, "L": 4096, "H": 80, "P": 64, "G": 1, "N": 128},
            {"bf16_tensor": 62_363_009_024, "fp32_simt": 990_576_000},
            349_176_128,
        ),
    ],
)
def test_counts_are_exact(name: str, axes: dict[str, int], flops: dict[str, int], nbytes: int) -> None:
    counts = get_problem(name).counts(axes)
    assert counts.flops == {flop_class: float(value) for flop_class, value in flops.items()}
    assert counts.bytes == float(nbytes)
    assert counts.comm_bytes == 0


#: Problems whose byte count is not every declared tensor once, and why.
NOT_EVERY_TENSOR_ONCE = {
    "grouped_gemm_bf16": "the weights of empty experts need not be read",
    "paged_decode_attention": "only the pages of the T cached tokens need be read, not the whole pool",
    "mla_decode": "only the T cached tokens' latents need be read, not the cache's unused slots",
    "moe_gemm_swiglu": "the weights of empty experts need not be read",
}


@pytest.mark.parametrize("name", PROBLEMS)
def test_bytes_are_every_input_read_once_and_every_output_written_once(name: str) -> None:
    """A brute-force count from the declared tensors, at every shape (GPU shapes too: no data)."""
    if name in NOT_EVERY_TENSOR_ONCE:
        pytest.skip(NOT_EVERY_TENSOR_ONCE[name])
    problem = get_problem(name)
    for shape in problem.shapes:
        tensors = [
            torch.empty(spec.concrete_shape(shape.axes), dtype=getattr(torch, spec.dtype), device="meta")
            for spec in problem.inputs + problem.outputs
        ]
        declared = sum(tensor.numel() * tensor.element_size() for tensor in tensors)
        assert problem.counts(shape.axes).bytes == declared, shape.shape_id


# ---------------------------------------------------------------- metadata


def test_the_catalogue_ships_every_single_gpu_problem_and_at_least_thirty_in_all() -> None:
    assert set(PROBLEMS) >= EXPECTED
    assert len(NATIVE) >= 30  # with the multi-GPU problems (tests/evaluator/test_multi_problems.py)


@pytest.mark.parametrize("name", PROBLEMS)
def test_every_problem_has_small_cpu_shapes_ranked_gpu_shapes_and_three_distributions(name: str) -> None:
    problem = get_problem(name)
    cpu = problem.select_shapes("all", device="cpu")
    assert 1 <= len(cpu) <= 2 and not any(shape.ranked for shape in cpu)
    assert problem.ranked_shapes and any(shape.quick for shape in problem.shapes)
    assert len(problem.distributions) >= 3 and problem.test_seeds
    if all(spec.dtype.startswith("int") for spec in problem.outputs):  # only the exact integer passes
        assert problem.rtol == 0 and problem.atol == 0.5 and problem.matched_ratio == 1.0
    else:
        assert 0 < problem.rtol < 0.1 and problem.atol >= 0 and 0.99 <= problem.matched_ratio <= 1.0
    for shape in cpu:
        counts = problem.counts(shape.axes)
        assert counts.bytes < 16e6 and counts.total_flops < 1e9, shape.shape_id


@pytest.mark.parametrize("name", PROBLEMS)
def test_generated_inputs_match_the_declared_specs(name: str) -> None:
    problem = get_problem(name)
    shape = problem.select_shapes("all", device="cpu")[0]
    for distribution in problem.distributions:
        inputs = problem.reference_module().generate_inputs(shape.axes, 1, "cpu", distribution)
        assert list(inputs) == [spec.name for spec in problem.inputs]
        for spec in problem.inputs:
            tensor = inputs[spec.name]
            assert tensor.shape == spec.concrete_shape(shape.axes), spec.name
            assert str(tensor.dtype) == f"torch.{spec.dtype}", spec.name
            assert tensor.is_contiguous(), spec.name
            if tensor.is_floating_point():
                values = tensor.double()
                assert torch.isfinite(values).all() and values.abs().max() > 0, (spec.name, distribution)


@pytest.mark.parametrize("name", PROBLEMS)
def test_inputs_are_deterministic_per_seed_and_differ_across_seeds_and_distributions(name: str) -> None:
    problem = get_problem(name)
    generate = problem.reference_module().generate_inputs
    axes = problem.select_shapes("all", device="cpu")[0].axes
    first = problem.inputs[0].name
    normal = generate(axes, 1, "cpu", problem.distributions[0])[first]
    assert torch.equal(normal, generate(axes, 1, "cpu", problem.distributions[0])[first])
    assert not torch.equal(normal, generate(axes, 2, "cpu", problem.distributions[0])[first])
    for other in problem.distributions[1:]:
        assert not torch.equal(normal, generate(axes, 1, "cpu", other)[first]), other


# ---------------------------------------------------------------- tolerance


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_baseline_passes_every_cpu_case_with_margin(name: str) -> None:
    problem = get_problem(name)
    for shape, seed, distribution in cpu_cases(problem):
        outputs, reference, scales = run_kernel(
            problem, problem.reference_module().baseline, shape, seed, distribution
        )
        for output, ref in reference.items():
            case = (shape.shape_id, seed, distribution, output)
            assert matched_ratio(outputs[output], ref, problem, output, scales.get(output)) == 1.0, case
            assert worst_margin(outputs[output], ref, problem, output, scales.get(output)) < 0.8, case


@pytest.mark.parametrize("name", PROBLEMS)
def test_a_kernel_computing_in_lower_precision_fails(name: str) -> None:
    problem = get_problem(name)
    assert name in LOWER_PRECISION, "every problem keeps a lower-precision kernel in this file"
    cheat = LOWER_PRECISION[name]
    for shape, seed, distribution in cpu_cases(problem):
        outputs, reference, scales = run_kernel(problem, cheat, shape, seed, distribution)
        assert failed_outputs(problem, outputs, reference, scales), (shape.shape_id, seed, distribution)


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_example_submission_matches_the_reference(name: str) -> None:
    problem = get_problem(name)
    example = load_example(name)
    if name in CPU_UNSUPPORTED and (reason := CPU_UNSUPPORTED[name]()):
        pytest.skip(reason)
    for shape, seed, distribution in cpu_cases(problem)[:4]:
        outputs, reference, scales = run_kernel(problem, example.kernel, shape, seed, distribution)
        for output, ref in reference.items():
            assert matched_ratio(outputs[output], ref, problem, output, scales.get(output)) == 1.0, (
                shape.shape_id,
                distribution,
                output,
            )


# ---------------------------------------------------------------- tolerance rules and structure


def test_rms_tolerances_scale_atol_with_the_reference() -> None:
    ref = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float64)  # RMS 2.5; row RMS 3.54, 0
    whole = OutputTolerance(atol=0.1, rtol=0.0, atol_scale="rms").allowed_error(ref)
    assert torch.allclose(whole, torch.full((2, 2), 0.25, dtype=torch.float64))
    rows = OutputTolerance(atol=0.1, rtol=0.0, atol_scale="row_rms").allowed_error(ref)
    assert rows[0, 0].item() == pytest.approx(0.1 * (12.5**0.5))
    # a row that is zero in the reference is held to a tenth of the output's RMS, not to zero
    assert rows[1, 0].item() == pytest.approx(0.1 * 0.1 * 2.5)
    assert OutputTolerance(atol=0.1, rtol=0.5).allowed_error(ref)[0, 1].item() == pytest.approx(2.1)


def test_inputs_tolerances_scale_atol_with_the_reference_modules_error_scale() -> None:
    ref = torch.tensor([0.0, 100.0], dtype=torch.float64)  # a sum that cancelled, one that did not
    scale = torch.tensor([8.0, 8.0], dtype=torch.float64)  # the same rows' L2 norms
    tolerance = OutputTolerance(atol=0.1, rtol=0.01, atol_scale="inputs")
    assert torch.allclose(tolerance.allowed_error(ref, scale), torch.tensor([0.8, 1.8], dtype=torch.float64))
    with pytest.raises(ValueError, match="error_scale"):
        tolerance.allowed_error(ref)


def test_every_output_whose_atol_follows_the_inputs_gets_a_scale_from_its_reference_module() -> None:
    checked = []
    for name in PROBLEMS:
        problem = get_problem(name)
        scaled = {
            spec.name for spec in problem.outputs if problem.tolerance_for(spec.name).atol_scale == "inputs"
        }
        if not scaled:
            continue
        module = problem.reference_module()
        shape, seed, distribution = cpu_cases(problem)[0]
        inputs = module.generate_inputs(shape.axes, seed, "cpu", distribution)
        scales = error_scales(problem, module, inputs, shape.axes)
        references = module.reference(inputs, shape.axes)
        assert scaled <= set(scales), name
        for output in scaled:
            reference_shape = references[output].shape
            assert torch.broadcast_shapes(scales[output].shape, reference_shape) == reference_shape, (
                name,
                output,
            )
            assert bool((scales[output] > 0).all()), (name, output)
        checked.append(name)
    assert "reduction_sum" in checked


def test_per_output_tolerances_override_the_problem_default() -> None:
    attention = get_problem("attention_fwd")
    assert attention.tolerance_for("O").atol_scale == "row_rms"
    assert attention.tolerance_for("LSE").atol_scale == "absolute"
    assert attention.tolerance_for("LSE").matched_ratio == 1.0
    assert attention.call_kwargs({"B": 1, "H": 1, "S": 8, "D": 128, "causal": 1}) == {"causal": 1}
    assert get_problem("gemm_bf16").call_kwargs({"M": 1, "N": 1, "K": 1}) == {}


def test_grouped_gemm_groups_are_ragged_with_a_fixed_number_of_empty_ones() -> None:
    problem = get_problem("grouped_gemm_bf16")
    axes = {"T": 16384, "G": 64, "N": 2048, "K": 2048}
    generate = problem.reference_module().group_sizes
    for seed in (1, 2, 3):
        sizes = generate(axes, seed)
        assert sum(sizes) == axes["T"] and sizes.count(0) == empty_groups(64) == 8
        assert 1 <= min(size for size in sizes if size) <= 3
    assert generate(axes, 1) != generate(axes, 2)
    inputs = problem.reference_module().generate_inputs(problem.shapes[1].axes, 1, "cpu", "normal")
    offsets = inputs["group_offsets"].tolist()
    assert offsets[0] == 0 and offsets[-1] == problem.shapes[1].axes["T"] and offsets == sorted(offsets)


def test_docs_show_the_catalogue_as_it_is() -> None:
    docs = (REPO / "docs" / "problems.md").read_text()
    assert catalogue_markdown(list(NATIVE.values())) in docs, (
        "regenerate the table: python -m evaluator problems --markdown"
    )


def test_a_baseline_or_title_longer_than_the_sites_column_is_refused_when_loaded(tmp_path: Path) -> None:
    """PostgreSQL refuses text longer than its column at sync (SQLite does not): the loader says so first."""
    import shutil

    from evaluator.problems import TEXT_LIMITS, CatalogueError, load_problem

    folder = tmp_path / "vector_add"
    shutil.copytree(REPO / "evaluator" / "problems" / "vector_add", folder)
    toml = (folder / "problem.toml").read_text()
    long_baseline = "x" * (TEXT_LIMITS["baseline"] + 1)
    (folder / "problem.toml").write_text(
        "\n".join(f'baseline = "{long_baseline}"' if line.startswith("baseline =") else line
                  for line in toml.splitlines()))
    with pytest.raises(CatalogueError, match="baseline is 201 characters, at most 200"):
        load_problem(folder)
