"""w4a16_gemm, fp8_blockscaled_gemm, moe_router_topk, moe_permute, paged_decode_attention and
selective_scan beyond the catalogue-wide checks of test_catalogue.py: the layouts and inputs they
promise, their counts against brute-force counts, the mistakes a kernel for them typically makes
(caught by the tolerance on the CPU shapes), and the harness on the CPU development device (the
example and the baseline pass; a wrong kernel is INCORRECT_NUMERICAL).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from evaluator.problems import TensorSpec, get_problem
from tests.evaluator.problem_checks import assert_example_and_baseline_pass, assert_wrong_kernel_fails
from tests.evaluator.test_catalogue import cpu_cases, failed_outputs, run_kernel
from tests.harness_helpers import cuda_available, evaluate_file

CPU = ("--device", "cpu")
NAMES = [
    "w4a16_gemm",
    "fp8_blockscaled_gemm",
    "moe_router_topk",
    "moe_permute",
    "paged_decode_attention",
    "selective_scan",
]


def reference_module(name: str) -> ModuleType:
    return get_problem(name).reference_module()


# ---------------------------------------------------------------- shapes of tensors


def test_a_dimension_may_be_the_product_of_two_axes() -> None:
    spec = TensorSpec("permuted", ("T*K", "H"), "bfloat16")
    assert spec.concrete_shape({"T": 37, "K": 2, "H": 64}) == (74, 64)
    assert TensorSpec("y", ("2*I",), "bfloat16").concrete_shape({"I": 5}) == (10,)


# ---------------------------------------------------------------- layouts and inputs


def test_w4a16_packs_column_8i_plus_j_into_bits_4j_of_word_i() -> None:
    module = reference_module("w4a16_gemm")
    q = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 15, 0, 8, 9, 10, 11, 12, 13, 14]])
    words = module.pack(q)
    assert words.dtype == torch.int32 and words.shape == (1, 2)
    assert int(words[0, 0]) & 0xF == 1 and (int(words[0, 0]) >> 28) & 0xF == 15  # a negative word
    assert torch.equal(module.unpack(words), q)
    inputs = module.generate_inputs({"M": 1, "N": 64, "K": 256}, 1, "cpu", "outliers")
    assert torch.equal(module.pack(module.unpack(inputs["qweight"])), inputs["qweight"])


def test_fp8_blockscaled_reference_is_the_per_element_formula() -> None:
    module = reference_module("fp8_blockscaled_gemm")
    axes = {"M": 3, "N": 256, "K": 256}
    inputs = module.generate_inputs(axes, 1, "cpu", "rowscale")
    a, b = inputs["A"].double(), inputs["B"].double()
    sa, sb = inputs["scale_a"].double(), inputs["scale_b"].double()
    expected = torch.zeros(3, 256, dtype=torch.float64)
    for kb in range(2):
        cols = slice(128 * kb, 128 * (kb + 1))
        partial = a[:, cols] @ b[:, cols].t()  # (M, N)
        expected += partial * sa[:, kb, None] * sb[:, kb].repeat_interleave(128)[None, :]
    assert torch.allclose(module.reference(inputs, axes)["C"], expected, rtol=1e-12, atol=1e-12)
    # DeepSeek-V3's quantisation: each block's largest value is +-448 exactly
    assert float(inputs["A"].float().abs().amax()) == 448.0


def test_router_logits_are_at_least_a_thousandth_apart_in_every_row() -> None:
    problem = get_problem("moe_router_topk")
    for shape, seed, distribution in cpu_cases(problem):
        logits = problem.reference_module().generate_inputs(shape.axes, seed, "cpu", distribution)["logits"]
        gaps = logits.double().sort(dim=-1).values.diff(dim=-1)
        assert float(gaps.min()) >= 0.999e-3, (shape.shape_id, distribution)


def test_moe_routings_name_distinct_experts_and_hot_leaves_experts_empty() -> None:
    module = reference_module("moe_permute")
    axes = {"T": 500, "H": 8, "E": 64, "K": 6}
    for distribution in module.DISTRIBUTIONS:
        ids = module.routing(axes, 1, "cpu", distribution).long()
        assert ids.shape == (500, 6) and int(ids.min()) >= 0 and int(ids.max()) < 64
        assert all(len(set(row)) == 6 for row in ids.tolist()), distribution
        used = torch.bincount(ids.view(-1), minlength=64)
        if distribution == "hot":
            assert int(used.max()) == 500 and int((used == 0).sum()) >= 64 - 1 - 16
        else:
            assert int((used == 0).sum()) < 16, distribution
    assert not torch.equal(module.routing(axes, 1, "cpu", "skewed"), module.routing(axes, 2, "cpu", "skewed"))


def test_paged_lengths_sum_to_t_and_fit_every_shapes_pool() -> None:
    """Counts use T: the generated lengths must sum to it exactly, at every shape and seed (the
    page tables too are drawn here, without the caches)."""
    module = reference_module("paged_decode_attention")
    for shape in get_problem("paged_decode_attention").shapes:
        for seed in (1, 2, 3):
            lengths = module.sequence_lengths(shape.axes, seed)
            assert sum(lengths) == shape.axes["T"] and len(lengths) == shape.axes["B"], shape.shape_id
            assert min(lengths) >= 1 and max(lengths) <= shape.axes["S"], shape.shape_id
            table, used = module.page_tables(shape.axes, seed, lengths)
            assert int(used.sum()) == sum(-(-length // 16) for length in lengths)
            assert table.shape == (shape.axes["B"], shape.axes["S"] // 16)
            assert int(table.min()) >= 0 and int(table.max()) < shape.axes["NB"]


def test_paged_slots_past_each_sequence_hold_larger_values() -> None:
    module = reference_module("paged_decode_attention")
    axes = get_problem("paged_decode_attention").select_shapes("all", device="cpu")[0].axes
    inputs = module.generate_inputs(axes, 1, "cpu", "normal")
    in_use = module._slots_in_use(inputs["seq_lens"].tolist(), inputs["block_table"], axes["NB"])
    magnitude = inputs["k_cache"].float().abs().mean(dim=(2, 3))  # (NB, 16)
    assert float(magnitude[~in_use].min()) > 4 * float(magnitude[in_use].max())


def test_paged_baseline_packs_each_sequences_slots_in_order_without_reading_the_lengths() -> None:
    """Version 2's gather: the first T packed slots are every sequence's token slots in order,
    the filler up to the capacity points at real slots (the GPU test below checks there is no
    host sync)."""
    module = reference_module("paged_decode_attention")
    axes = get_problem("paged_decode_attention").select_shapes("all", device="cpu")[0].axes
    inputs = module.generate_inputs(axes, 2, "cpu", "normal")
    lengths = inputs["seq_lens"].tolist()
    capacity = axes["NB"] * 16
    slots, cumulative = module._packed_slots(inputs["block_table"], inputs["seq_lens"], capacity)
    expected = [
        int(inputs["block_table"][row, position // 16]) * 16 + position % 16
        for row, length in enumerate(lengths)
        for position in range(length)
    ]
    assert slots.shape == (capacity,) and slots[: len(expected)].tolist() == expected
    assert cumulative.tolist() == [sum(lengths[:row]) for row in range(len(lengths) + 1)]
    assert int(slots.min()) >= 0 and int(slots.max()) < capacity


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU")
def test_paged_baseline_never_waits_for_the_device() -> None:
    """Version 1 read seq_lens on the host every call; under sync debug mode 'error' any
    host-device sync in version 2's CUDA path raises."""
    problem = get_problem("paged_decode_attention")
    module = problem.reference_module()
    axes = problem.select_shapes("quick", device="cuda")[0].axes
    inputs = module.generate_inputs(axes, 1, "cuda", "normal")
    out = torch.empty_like(inputs["q"])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        module.baseline(**inputs, out=out)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    expected = module.reference({name: tensor.cpu() for name, tensor in inputs.items()}, axes)["out"]
    assert torch.allclose(
        out.double().cpu(), expected, atol=2e-2 * float(expected.pow(2).mean().sqrt()), rtol=1e-2
    )


def sequential_scan(
    inputs: dict[str, torch.Tensor], state_dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The defining recurrence, one token at a time, in fp64 (the state rounded to ``state_dtype``
    after every token)."""
    x, dt, a = inputs["x"].double(), inputs["dt"].double(), inputs["A"].double()
    bm, cm = inputs["Bm"].double(), inputs["Cm"].double()
    b, seq, h, p = x.shape
    group = torch.arange(h) // (h // bm.shape[2])
    state = torch.zeros(b, h, p, bm.shape[3], dtype=torch.float64)
    y = torch.empty_like(x)
    for t in range(seq):
        decay = torch.exp(dt[:, t] * a)[:, :, None, None]
        state = decay * state + dt[:, t, :, None, None] * x[:, t, :, :, None] * bm[:, t, group, None, :]
        state = state.to(state_dtype).double()
        y[:, t] = torch.einsum("bhpn,bhn->bhp", state, cm[:, t, group])
    return y


@pytest.mark.parametrize("distribution", ["normal", "long_memory"])
def test_selective_scan_reference_and_baseline_are_the_recurrence(distribution: str) -> None:
    """Two chunked formulations (the reference's, chunk by chunk in fp64, and ssd_minimal's in the
    baseline) against the recurrence itself, with groups and a partial last chunk."""
    module = reference_module("selective_scan")
    axes = {"B": 2, "L": 300, "H": 4, "P": 3, "G": 2, "N": 5}
    inputs = module.generate_inputs(axes, 1, "cpu", distribution)
    expected = sequential_scan(inputs)
    assert torch.allclose(module.reference(inputs, axes)["y"], expected, rtol=1e-9, atol=1e-12)
    y = torch.empty(expected.shape, dtype=torch.bfloat16)
    module.baseline(*inputs.values(), y)
    assert torch.allclose(y.double(), expected, rtol=1e-2, atol=1e-3 * float(expected.abs().max()))


# ---------------------------------------------------------------- counts


def brute_force_scan_counts(b: int, seq: int, h: int, p: int, g: int, n: int) -> tuple[int, int]:
    """Tensor and SIMT flops of the chunked SSD, one operation at a time (the terms of counts.py)."""
    chunk = 256
    starts = list(range(0, seq, chunk))
    tensor = simt = 0
    for index, start in enumerate(starts):
        q = min(chunk, seq - start)
        first, last = index == 0, index == len(starts) - 1
        simt += h * (2 * q - 1)  # dt * A, running sum inside the chunk
        for ell in range(q):
            for _s in range(ell + 1):
                tensor += 2 * n * g + 2 * p * h  # C_l . B_s per group; (CB decay dt) x_s per head
                simt += 4 * h  # subtraction, exp, two products
            if not last:
                tensor += 2 * p * n * h  # token's contribution to the chunk state
                simt += (3 + p) * h
            if not first:
                tensor += 2 * p * n * h  # C_l @ incoming state
                simt += (1 + 2 * p) * h
        if not first and not last:
            simt += h * (1 + 2 * p * n)  # state passed on
    return b * tensor, b * simt


@pytest.mark.parametrize(
    "axes",
    [
        {"B": 1, "L": 100, "H": 2, "P": 3, "G": 1, "N": 4},
        {"B": 2, "L": 600, "H": 4, "P": 2, "G": 2, "N": 3},
        {"B": 1, "L": 1024, "H": 3, "P": 2, "G": 1, "N": 2},
    ],
)
def test_selective_scan_flops_match_a_brute_force_count(axes: dict[str, int]) -> None:
    tensor, simt = brute_force_scan_counts(*(axes[name] for name in ("B", "L", "H", "P", "G", "N")))
    counts = get_problem("selective_scan").counts(axes)
    assert counts.flops == {"bf16_tensor": float(tensor), "fp32_simt": float(simt)}


@pytest.mark.parametrize("name", ["w4a16_gemm", "fp8_blockscaled_gemm"])
def test_gemm_flops_match_a_brute_force_count(name: str) -> None:
    axes = {"M": 3, "N": 256, "K": 384}
    products = sum(1 for _ in range(axes["M"] * axes["N"]) for _ in range(axes["K"]))
    counts = get_problem(name).counts(axes)
    tensor = "bf16_tensor" if name == "w4a16_gemm" else "fp8_tensor"
    assert counts.flops[tensor] == 2 * products
    if name == "fp8_blockscaled_gemm":  # one fused multiply-add per output and K block
        assert counts.flops["fp32_simt"] == 2 * axes["M"] * axes["N"] * (axes["K"] // 128)


def test_paged_decode_flops_count_the_generated_keys() -> None:
    axes = get_problem("paged_decode_attention").select_shapes("all", device="cpu")[0].axes
    inputs = reference_module("paged_decode_attention").generate_inputs(axes, 1, "cpu", "normal")
    pairs = int(inputs["seq_lens"].sum()) * axes["Hq"]  # (query head, cached token)
    assert get_problem("paged_decode_attention").counts(axes).flops == {"bf16_tensor": 4.0 * 128 * pairs}


# ---------------------------------------------------------------- wrong kernels


def w4a16_without_the_zero_point(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor
) -> None:
    """The nibbles taken as 0..15 (unsigned weights), not q - 8."""
    n, words = qweight.shape
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    nibbles = ((qweight[..., None] >> shifts) & 0xF).view(n, -1, 128).float()
    y.copy_(x.float() @ (nibbles * scales.float()[..., None]).view(n, words * 8).t())


def w4a16_in_awq_order(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> None:
    """AWQ's interleaved packing: bits 4j of a word read as column 8i + [0, 2, 4, 6, 1, 3, 5, 7][j]."""
    n, words = qweight.shape
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    nibbles = (qweight[..., None] >> shifts) & 0xF  # (N, K/8, 8) in bit order
    columns = torch.empty_like(nibbles)
    columns[..., [0, 2, 4, 6, 1, 3, 5, 7]] = nibbles
    w = (columns.view(n, -1, 128) - 8).float() * scales.float()[..., None]
    y.copy_(x.float() @ w.view(n, words * 8).t())


def w4a16_with_group_scales_swapped(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, y: torch.Tensor
) -> None:
    get_problem("w4a16_gemm").reference_module().baseline(x, qweight, scales.roll(1, dims=1).contiguous(), y)


def fp8_blockscaled_with_one_scale_per_tensor(
    A: torch.Tensor, B: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, C: torch.Tensor
) -> None:
    C.copy_((A.float() * scale_a.mean()) @ (B.float() * scale_b.mean()).t())


def router_ids_in_expert_order(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> None:
    """The right experts and weights, listed by expert number instead of by weight."""
    values, top = torch.topk(logits, ids.shape[1], dim=-1)
    order = top.argsort(dim=-1)
    weights.copy_(torch.softmax(values, dim=-1).gather(1, order))
    ids.copy_(top.gather(1, order))


def router_without_renormalising(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> None:
    """Mixtral-style selection but the weights left as probabilities over all E experts."""
    probabilities = torch.softmax(logits, dim=-1)
    top, chosen = torch.topk(probabilities, ids.shape[1], dim=-1)
    weights.copy_(top)
    ids.copy_(chosen)


def permute_with_tokens_reversed_in_each_expert(*tensors: torch.Tensor) -> None:
    """A sort by expert alone that happens to keep the tokens of an expert in reverse order."""
    hidden, topk_ids, permuted, offsets, dest_rows = tensors
    flat = topk_ids.view(-1).long()
    pairs = torch.arange(flat.numel())
    order = torch.sort(flat * flat.numel() - pairs).indices
    permuted.copy_(hidden[order // topk_ids.shape[1]])
    dest_rows.view(-1)[order] = pairs.to(torch.int32)
    offsets.copy_(torch.searchsorted(flat[order], torch.arange(offsets.numel())))


def permute_with_offsets_shifted(*tensors: torch.Tensor) -> None:
    """Ends instead of starts: expert_offsets[e] = the first row after expert e."""
    hidden, topk_ids, permuted, offsets, dest_rows = tensors
    get_problem("moe_permute").reference_module().baseline(hidden, topk_ids, permuted, offsets, dest_rows)
    offsets.copy_(torch.cat([offsets[1:], offsets[-1:]]))


def paged_attention_over_whole_pages(*tensors: torch.Tensor) -> None:
    """Every slot of a sequence's last page attended to (seq_lens rounded up to 16)."""
    q, k_cache, v_cache, block_table, seq_lens, out = tensors
    rounded = (seq_lens + 15) // 16 * 16
    get_problem("paged_decode_attention").reference_module().baseline(
        q, k_cache, v_cache, block_table, rounded.to(torch.int32), out
    )


def paged_attention_with_heads_interleaved(*tensors: torch.Tensor) -> None:
    """Query head h reading KV head h % Hkv (repeat instead of repeat_interleave)."""
    q, k_cache, v_cache, block_table, seq_lens, out = tensors
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    regrouped = q.view(b, hq // hkv, hkv, d).transpose(1, 2).reshape(b, hq, d)  # head h -> slot
    answer = torch.empty_like(out)
    get_problem("paged_decode_attention").reference_module().baseline(
        regrouped.contiguous(), k_cache, v_cache, block_table, seq_lens, answer
    )
    out.copy_(answer.view(b, hkv, hq // hkv, d).transpose(1, 2).reshape(b, hq, d))


def scan_without_passing_states(*tensors: torch.Tensor) -> None:
    """Every chunk of 256 tokens scanned from a zero state."""
    x, dt, A, Bm, Cm, y = tensors
    baseline = get_problem("selective_scan").reference_module().baseline
    for start in range(0, x.shape[1], 256):
        chunk = slice(start, start + 256)
        part = torch.empty_like(y[:, chunk])
        baseline(x[:, chunk], dt[:, chunk], A, Bm[:, chunk], Cm[:, chunk], part)
        y[:, chunk] = part


def scan_with_groups_interleaved(*tensors: torch.Tensor) -> None:
    """Head h reading group h % G instead of h // (H/G)."""
    x, dt, A, Bm, Cm, y = tensors
    h, g = x.shape[2], Bm.shape[2]
    order = torch.arange(h).view(h // g, g).t().reshape(-1)  # heads of group h % G placed together
    answer = torch.empty_like(y)
    get_problem("selective_scan").reference_module().baseline(
        x[:, :, order].contiguous(), dt[:, :, order].contiguous(), A[order].contiguous(), Bm, Cm, answer
    )
    y[:, :, order] = answer


def scan_without_dt_on_the_input(*tensors: torch.Tensor) -> None:
    """The decay exp(dt A) applied, but x not multiplied by dt."""
    x, dt, A, Bm, Cm, y = tensors
    seq, pad = x.shape[1], -x.shape[1] % 256

    def padded(t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(t.float(), (0, 0) * (t.dim() - 2) + (0, pad))

    ssd_minimal = get_problem("selective_scan").reference_module().ssd_minimal
    y.copy_(ssd_minimal(padded(x), padded(dt * A), padded(Bm), padded(Cm), 256)[:, :seq])


#: (problem, wrong kernel, the distributions that must expose it; None: every one; the shapes:
#: None for every CPU shape, else the shape ids).
WRONG = [
    pytest.param("w4a16_gemm", w4a16_without_the_zero_point, None, None, id="w4a16-no-zero-point"),
    pytest.param("w4a16_gemm", w4a16_in_awq_order, None, None, id="w4a16-awq-order"),
    pytest.param(
        "w4a16_gemm", w4a16_with_group_scales_swapped, ("normal", "outliers"), None, id="w4a16-scales-swapped"
    ),
    pytest.param(
        "fp8_blockscaled_gemm",
        fp8_blockscaled_with_one_scale_per_tensor,
        ("outliers", "rowscale"),
        None,
        id="fp8-blockscaled-one-scale",
    ),
    pytest.param("moe_router_topk", router_ids_in_expert_order, None, None, id="router-expert-order"),
    pytest.param(
        "moe_router_topk",
        router_without_renormalising,
        ("normal", "uniform", "outliers"),  # under `large` the K best hold all but ~1e-9 of the mass
        None,
        id="router-not-renormalised",
    ),
    pytest.param(
        "moe_permute", permute_with_tokens_reversed_in_each_expert, None, None, id="permute-unstable"
    ),
    pytest.param("moe_permute", permute_with_offsets_shifted, None, None, id="permute-offsets-shifted"),
    pytest.param(
        "paged_decode_attention", paged_attention_over_whole_pages, None, None, id="paged-whole-pages"
    ),
    pytest.param(
        "paged_decode_attention",
        paged_attention_with_heads_interleaved,
        None,
        None,
        id="paged-heads-interleaved",
    ),
    pytest.param("selective_scan", scan_without_passing_states, None, None, id="scan-no-state-passing"),
    pytest.param(
        "selective_scan",
        scan_with_groups_interleaved,
        None,
        ("b2_l600_h4_p16_g2_n16",),
        id="scan-groups-interleaved",
    ),
    pytest.param("selective_scan", scan_without_dt_on_the_input, None, None, id="scan-no-dt-on-input"),
]


@pytest.mark.parametrize(("name", "wrong", "exposed_by", "shapes"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    name: str,
    wrong: Callable[..., None],
    exposed_by: tuple[str, ...] | None,
    shapes: tuple[str, ...] | None,
) -> None:
    assert_wrong_kernel_fails(name, wrong, exposed_by, shapes)


def test_a_scan_whose_state_is_rounded_to_bf16_every_token_fails_under_long_memory() -> None:
    problem = get_problem("selective_scan")

    def bf16_state(*tensors: torch.Tensor) -> None:
        x, dt, A, Bm, Cm, y = tensors
        inputs = {"x": x, "dt": dt, "A": A, "Bm": Bm, "Cm": Cm}
        y.copy_(sequential_scan(inputs, state_dtype=torch.bfloat16))

    for shape, seed, distribution in cpu_cases(problem):
        if distribution == "long_memory":
            assert failed_outputs(problem, *run_kernel(problem, bf16_state, shape, seed, distribution)), (
                shape.shape_id, seed)


# ---------------------------------------------------------------- the harness, CPU device


def submission(kernel: Callable[..., None]) -> str:
    """A submission file whose ``kernel`` is this function of the module (and what it uses)."""
    imports = "import torch\n\nfrom evaluator.problems import get_problem\n\n\n"
    return f"{imports}{inspect.getsource(kernel)}\n\nkernel = {kernel.__name__}\n"


HARNESS_WRONG = {
    "w4a16_gemm": w4a16_in_awq_order,
    "fp8_blockscaled_gemm": fp8_blockscaled_with_one_scale_per_tensor,
    "moe_router_topk": router_ids_in_expert_order,
    "moe_permute": permute_with_tokens_reversed_in_each_expert,
    "paged_decode_attention": paged_attention_over_whole_pages,
    "selective_scan": scan_without_passing_states,
}


@pytest.mark.parametrize("name", NAMES)
def test_the_example_and_the_baseline_pass_through_the_harness(name: str, tmp_path: Path) -> None:
    assert_example_and_baseline_pass(name, tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_the_harness_reports_a_wrong_submission_as_incorrect(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}_wrong.py"
    path.write_text(submission(HARNESS_WRONG[name]))
    report = evaluate_file(name, path, *CPU)
    assert report["status"] == "INCORRECT_NUMERICAL", report["message"]
    assert "outside tolerance" in report["message"]


def test_an_honest_router_that_ranks_fp32_probabilities_picks_the_references_experts() -> None:
    """The Hugging Face router (softmax over all E in fp32, then topk) must select the same experts as
    the fp64 reference on every CPU case and on the quick shape's outliers (version 1's inputs let
    probabilities underflow to 0 there: arbitrary experts among the zeros)."""
    problem = get_problem("moe_router_topk")
    module = problem.reference_module()
    quick = [(shape, 1, "outliers") for shape in problem.shapes if shape.shape_id == "t16384_e256_k8"]
    assert quick
    for shape, seed, distribution in [*cpu_cases(problem), *quick]:
        logits = module.generate_inputs(shape.axes, seed, "cpu", distribution)["logits"]
        ids = torch.topk(torch.softmax(logits, dim=-1), shape.axes["K"], dim=-1, sorted=True).indices
        expected = module.reference({"logits": logits}, shape.axes)["topk_ids"]
        assert torch.equal(ids, expected), (shape.shape_id, distribution)
        top = logits.amax(dim=-1, keepdim=True)
        assert float((top - logits).max()) <= module.MAX_SPAN + shape.axes["E"] * module.MIN_GAP
