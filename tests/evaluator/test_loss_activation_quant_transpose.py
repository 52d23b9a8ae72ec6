"""cross_entropy, silu_and_mul, gelu_and_mul, fp8_quant_per_token, fp8_quant_per_block and transpose
beyond the catalogue-wide checks of test_catalogue.py: the tensor shapes they declare (``2*I``,
``H/128``), transpose's count without flops, the mistakes a kernel for them typically makes (caught
by the tolerance on the CPU shapes) and the harness on the CPU development device (the example and
the baseline pass; a wrong kernel is INCORRECT_NUMERICAL, fp8 outputs included)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from evaluator.gpu_specs import get_gpu_spec
from evaluator.harness.correctness import compare, poison_
from evaluator.problems import CatalogueError, get_problem
from evaluator.scoring import sol_figures
from evaluator.sol import t_sol
from tests.evaluator.problem_checks import assert_example_and_baseline_pass, assert_wrong_kernel_fails
from tests.harness_helpers import evaluate_file

CPU = ("--device", "cpu")
NAMES = [
    "cross_entropy",
    "silu_and_mul",
    "gelu_and_mul",
    "fp8_quant_per_token",
    "fp8_quant_per_block",
    "transpose",
]


# ---------------------------------------------------------------- wrong kernels
# Each is a whole submission: ``submission`` writes its source under the imports below.


def cross_entropy_without_the_maximum(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    """exp of the raw logits: overflows fp32 past 88.7 (every row under `large`)."""
    x = logits.float()
    loss.copy_(torch.log(torch.exp(x).sum(dim=1)) - x.gather(1, target[:, None]).squeeze(1))


def cross_entropy_of_the_next_token(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    """The loss of target + 1: an off-by-one in the gather."""
    x = logits.float()
    shifted = (target + 1) % x.shape[1]
    loss.copy_(torch.logsumexp(x, dim=1) - x.gather(1, shifted[:, None]).squeeze(1))


def cross_entropy_averaged(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    """The mean loss of the batch (reduction="mean") written to every token."""
    loss.copy_(F.cross_entropy(logits.float(), target).expand_as(loss))


def silu_and_mul_swapped(x: torch.Tensor, y: torch.Tensor) -> None:
    """silu of the up half times the gate half."""
    gate, up = x.float().chunk(2, dim=-1)
    y.copy_(F.silu(up) * gate)


def sigmoid_and_mul(x: torch.Tensor, y: torch.Tensor) -> None:
    """sigmoid(gate) * up: the gate's own factor forgotten."""
    gate, up = x.float().chunk(2, dim=-1)
    y.copy_(torch.sigmoid(gate) * up)


def silu_and_mul_interleaved(x: torch.Tensor, y: torch.Tensor) -> None:
    """Gate and up read as interleaved columns (2i, 2i + 1), not as halves."""
    values = x.float()
    y.copy_(F.silu(values[:, 0::2]) * values[:, 1::2])


def silu_and_mul_overflowing(x: torch.Tensor, y: torch.Tensor) -> None:
    """silu(g) = g exp(g) / (1 + exp(g)): inf / inf = NaN once g > 88.7 (under `wide_gate`)."""
    gate, up = x.float().chunk(2, dim=-1)
    e = torch.exp(gate)
    y.copy_(gate * e / (1 + e) * up)


def erf_gelu_and_mul(x: torch.Tensor, y: torch.Tensor) -> None:
    """The exact (erf) GELU in place of the tanh form: up to 11% off where gelu(g) is small."""
    gate, up = x.float().chunk(2, dim=-1)
    y.copy_(F.gelu(gate) * up)


def silu_in_place_of_gelu(x: torch.Tensor, y: torch.Tensor) -> None:
    gate, up = x.float().chunk(2, dim=-1)
    y.copy_(F.silu(gate) * up)


def gelu_and_mul_overflowing(x: torch.Tensor, y: torch.Tensor) -> None:
    """tanh(z) = (exp(2z) - 1) / (exp(2z) + 1): NaN once z > 44 (gates above ~9.7, `wide_gate`)."""
    gate, up = x.float().chunk(2, dim=-1)
    e = torch.exp(2 * math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3))
    y.copy_(0.5 * gate * (1 + (e - 1) / (e + 1)) * up)


def fp8_quant_rounding_toward_zero(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """Right scales, but x / scale truncated to e4m3 instead of rounded to nearest (either problem:
    the group is H / the number of scales per row)."""
    t, h = x.shape
    group = h // scale.shape[-1]
    values = x.float().view(t, h // group, group)
    scales = values.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4) / 448.0
    ratio = values / scales
    nearest = ratio.to(torch.float8_e4m3fn)
    codes = nearest.view(torch.uint8).clone()
    codes[nearest.float().abs() > ratio.abs()] -= 1  # one step back towards zero
    q.view(t, h // group, group).copy_(codes.view(torch.float8_e4m3fn))
    scale.copy_(scales.view(scale.shape))


def fp8_quant_for_e4m3fnuz(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """Scales for the e4m3fnuz format (largest value 240) while the output is e4m3fn (448)."""
    t, h = x.shape
    group = h // scale.shape[-1]
    values = x.float().view(t, h // group, group)
    scales = values.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4) / 240.0
    q.view(t, h // group, group).copy_(values / scales)
    scale.copy_(scales.view(scale.shape))


def fp8_quant_without_the_floor(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """No 1e-4 floor on the amax: 0 / 0 on the padding groups, tiny groups blown up to +-448."""
    t, h = x.shape
    group = h // scale.shape[-1]
    values = x.float().view(t, h // group, group)
    scales = values.abs().amax(dim=-1, keepdim=True) / 448.0
    q.view(t, h // group, group).copy_(values / scales)
    scale.copy_(scales.view(scale.shape))


def fp8_quant_per_row_scales(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    """One scale per token repeated for every group of the row, not one per 1 x 128 group."""
    values = x.float()
    row = values.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4) / 448.0
    q.copy_(values / row)
    scales.copy_(row.expand_as(scales))


def fp8_quant_power_of_two_scales(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    """UE8M0 scales (2^ceil(log2(amax / 448))), the variant of newer DeepSeek kernels, not this one's."""
    t, h = x.shape
    values = x.float().view(t, h // 128, 128)
    amax = values.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4)
    powers = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    q.view(t, h // 128, 128).copy_(values / powers)
    scales.copy_(powers.squeeze(-1))


def transpose_tiles_untransposed_inside(x: torch.Tensor, out: torch.Tensor) -> None:
    """32 x 32 tiles moved to their transposed place but copied as they are (only the square ones)."""
    m, n = x.shape
    for i in range(0, m, 32):
        for j in range(0, n, 32):
            tile = x[i : i + 32, j : j + 32]
            square = tile.shape[0] == tile.shape[1]
            out[j : j + tile.shape[1], i : i + tile.shape[0]] = tile if square else tile.t()


def transpose_by_reshape(x: torch.Tensor, out: torch.Tensor) -> None:
    """A reshape is not a transpose: the same bytes read in another shape."""
    out.copy_(x.reshape(out.shape))


def transpose_of_the_whole_tiles_only(x: torch.Tensor, out: torch.Tensor) -> None:
    """Only the full 32 x 32 tiles: the edge rows and columns are never written."""
    m, n = x.shape[0] // 32 * 32, x.shape[1] // 32 * 32
    out[:n, :m] = x[:m, :n].t()


#: (problem, wrong kernel, the distributions that must expose it; None: every one).
WRONG = [
    pytest.param("cross_entropy", cross_entropy_without_the_maximum, ("large",), id="ce-without-max"),
    pytest.param("cross_entropy", cross_entropy_of_the_next_token, None, id="ce-next-token"),
    pytest.param("cross_entropy", cross_entropy_averaged, None, id="ce-averaged"),
    pytest.param("silu_and_mul", silu_and_mul_swapped, None, id="silu-swapped"),
    pytest.param("silu_and_mul", sigmoid_and_mul, None, id="silu-sigmoid"),
    pytest.param("silu_and_mul", silu_and_mul_interleaved, None, id="silu-interleaved"),
    pytest.param("silu_and_mul", silu_and_mul_overflowing, ("wide_gate",), id="silu-overflowing"),
    pytest.param("gelu_and_mul", erf_gelu_and_mul, ("normal", "outliers", "wide_gate"), id="gelu-erf"),
    pytest.param("gelu_and_mul", silu_in_place_of_gelu, None, id="gelu-silu"),
    pytest.param("gelu_and_mul", gelu_and_mul_overflowing, ("wide_gate",), id="gelu-overflowing"),
    pytest.param("fp8_quant_per_token", fp8_quant_rounding_toward_zero, None, id="token-truncating"),
    pytest.param("fp8_quant_per_token", fp8_quant_for_e4m3fnuz, None, id="token-fnuz"),
    pytest.param("fp8_quant_per_token", fp8_quant_without_the_floor, ("padding",), id="token-no-floor"),
    pytest.param("fp8_quant_per_block", fp8_quant_rounding_toward_zero, None, id="block-truncating"),
    pytest.param("fp8_quant_per_block", fp8_quant_without_the_floor, ("padding",), id="block-no-floor"),
    pytest.param("fp8_quant_per_block", fp8_quant_per_row_scales, None, id="block-per-row"),
    pytest.param("fp8_quant_per_block", fp8_quant_power_of_two_scales, None, id="block-ue8m0"),
    pytest.param("transpose", transpose_tiles_untransposed_inside, None, id="transpose-tiles"),
    pytest.param("transpose", transpose_by_reshape, None, id="transpose-reshape"),
    pytest.param("transpose", transpose_of_the_whole_tiles_only, None, id="transpose-edges"),
]


@pytest.mark.parametrize(("name", "wrong", "exposed_by"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    name: str, wrong: Callable[..., None], exposed_by: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(name, wrong, exposed_by)


def e4m3_neighbours() -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of adjacent non-negative finite e4m3 values (0 and 2^-9 up to 416 and 448), fp64."""
    codes = torch.arange(0, 0x7F, dtype=torch.uint8)  # 0x7F is NaN
    values = codes.view(torch.float8_e4m3fn).double()
    return values[:-1], values[1:]


@pytest.mark.parametrize("name", ["fp8_quant_per_token", "fp8_quant_per_block"])
def test_rounding_to_nearest_or_across_a_near_tie_passes_and_a_full_step_does_not(name: str) -> None:
    """On the whole e4m3 grid: at a value 1e-6 off a midpoint, either neighbour passes (an fp32
    reciprocal instead of a division may move q across the midpoint), with the correctly rounded
    one at most 0.735 of the allowed error; a value just below a step above a power of two from 2^-4
    up (below, atol covers a step), truncated to that power, does not pass."""
    tolerance = get_problem(name).tolerance_for("q")
    low, high = e4m3_neighbours()
    midpoint = (low + high) / 2
    for exact in (midpoint * (1 - 1e-6), midpoint * (1 + 1e-6)):
        allowed = tolerance.allowed_error(exact)
        assert ((exact - low).abs() <= allowed).all() and ((high - exact).abs() <= allowed).all()
    correctly_rounded = (high - low) / 2 / tolerance.allowed_error(midpoint)
    assert correctly_rounded.max().item() == pytest.approx(0.735, abs=1e-3)
    powers = low[(low >= 2**-4) & (torch.log2(low) == torch.log2(low).round())]
    step = powers / 8
    just_below_the_next = powers + step * (1 - 1e-3)
    assert ((just_below_the_next - powers) > tolerance.allowed_error(just_below_the_next)).all()


# ---------------------------------------------------------------- shapes and counts


def test_shapes_declare_the_gated_halves_and_the_block_scales() -> None:
    silu = get_problem("silu_and_mul")
    assert silu.inputs[0].concrete_shape({"T": 3, "I": 5}) == (3, 10)
    block = get_problem("fp8_quant_per_block")
    scales = next(spec for spec in block.outputs if spec.name == "scales")
    assert scales.concrete_shape({"T": 3, "H": 7168}) == (3, 56)
    with pytest.raises(CatalogueError, match="not divisible by 128"):
        scales.concrete_shape({"T": 3, "H": 1000})
    assert all(shape.axes["H"] % 128 == 0 for shape in block.shapes)


def test_transpose_has_no_flops_and_a_memory_bound_speed_of_light() -> None:
    problem = get_problem("transpose")
    shape = problem.shape("m4096_n7168")
    counts = problem.counts(shape.axes)
    assert counts.flops == {} and counts.total_flops == 0
    gpu = get_gpu_spec("h200")
    bound = t_sol(counts, gpu)
    assert bound.bound == "memory" and bound.t_compute_s == 0
    assert bound.t_sol_s == pytest.approx(4 * 4096 * 7168 / 4.8e12)
    figures = sol_figures(counts, gpu, t_kernel_s=2 * bound.t_sol_s, t_baseline_s=4 * bound.t_sol_s)
    assert figures.tflops == 0 and figures.sol_fraction == pytest.approx(0.5)
    assert figures.score == pytest.approx(1 / (1 + 1 / 3))


# ---------------------------------------------------------------- fp8 outputs in the comparison


def test_an_unwritten_fp8_output_is_nonfinite_and_a_written_one_compares_by_value() -> None:
    problem = get_problem("fp8_quant_per_token")
    reference = torch.tensor([[0.0, 1.0, -448.0, 0.3]], dtype=torch.float64)
    out = torch.empty((1, 4), dtype=torch.float8_e4m3fn)
    poison_(out)
    stats = compare("q", out, reference, problem.tolerance_for("q"))
    assert stats["nonfinite_count"] == 4 and stats["matched_ratio"] == 0.0
    out.copy_(reference)
    stats = compare("q", out, reference, problem.tolerance_for("q"))
    assert stats["nonfinite_count"] == 0 and stats["matched_ratio"] == 1.0


# ---------------------------------------------------------------- the harness, CPU device


def submission(kernel: Callable[..., None]) -> str:
    """A submission file whose ``kernel`` is this function of the module."""
    imports = "import math\n\nimport torch\nimport torch.nn.functional as F\n\n\n"
    return f"{imports}{inspect.getsource(kernel)}\n\nkernel = {kernel.__name__}\n"


@pytest.mark.parametrize("name", NAMES)
def test_the_example_and_the_baseline_pass_through_the_harness(name: str, tmp_path: Path) -> None:
    assert_example_and_baseline_pass(name, tmp_path)


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("cross_entropy", cross_entropy_of_the_next_token),
        ("silu_and_mul", silu_and_mul_interleaved),
        ("gelu_and_mul", erf_gelu_and_mul),
        ("fp8_quant_per_token", fp8_quant_rounding_toward_zero),
        ("fp8_quant_per_block", fp8_quant_power_of_two_scales),
        ("transpose", transpose_of_the_whole_tiles_only),
    ],
    ids=NAMES,
)
def test_the_harness_reports_a_wrong_submission_as_incorrect(
    name: str, wrong: Callable[..., None], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}_wrong.py"
    path.write_text(submission(wrong))
    report = evaluate_file(name, path, *CPU)
    assert report["status"] == "INCORRECT_NUMERICAL", report["message"]
    assert "outside tolerance" in report["message"]
