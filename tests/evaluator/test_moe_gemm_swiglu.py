"""moe_gemm_swiglu beyond the catalogue-wide checks of test_catalogue.py: the byte count (the
non-empty experts' weights), the mistakes a fused MoE kernel typically makes (caught on the CPU
shapes) and the harness on the CPU development device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from evaluator.problems import get_problem
from evaluator.problems.grouped_gemm_bf16.counts import empty_groups
from tests.evaluator.problem_checks import (
    assert_example_and_baseline_pass,
    assert_harness_reports_incorrect,
    assert_wrong_kernel_fails,
)

NAME = "moe_gemm_swiglu"


def test_bytes_read_only_the_non_empty_experts_weights_and_inputs_have_that_many_empty() -> None:
    problem = get_problem(NAME)
    for shape in problem.shapes:
        t, g, i, k = (shape.axes[name] for name in ("T", "G", "I", "K"))
        used = g - empty_groups(g)
        assert problem.counts(shape.axes).bytes == 2 * (t * k + used * 2 * i * k + t * i) + 4 * (g + 1)
    cpu = problem.select_shapes("all", device="cpu")[1]
    offsets = problem.reference_module().generate_inputs(cpu.axes, 1, "cpu", "normal")["group_offsets"]
    sizes = offsets.diff()
    assert int((sizes == 0).sum()) == empty_groups(cpu.axes["G"]) and int(offsets[-1]) == cpu.axes["T"]


# ---------------------------------------------------------------- wrong kernels


def swiglu_of_the_up_projection(X: torch.Tensor, W13: torch.Tensor, group_offsets: torch.Tensor,
                                Y: torch.Tensor) -> None:
    """Gate and up swapped: silu of the up projection times the gate."""
    width, offsets = Y.shape[1], group_offsets.tolist()
    for expert in range(W13.shape[0]):
        start, end = offsets[expert], offsets[expert + 1]
        h = X[start:end].float() @ W13[expert].float().t()
        Y[start:end] = F.silu(h[:, width:]) * h[:, :width]


def swiglu_of_interleaved_rows(X: torch.Tensor, W13: torch.Tensor, group_offsets: torch.Tensor,
                               Y: torch.Tensor) -> None:
    """W13 read as gate and up rows interleaved (row 2j the gate, 2j + 1 the up), not stacked."""
    offsets = group_offsets.tolist()
    for expert in range(W13.shape[0]):
        start, end = offsets[expert], offsets[expert + 1]
        h = X[start:end].float() @ W13[expert].float().t()
        Y[start:end] = F.silu(h[:, 0::2]) * h[:, 1::2]


def swiglu_with_the_next_experts_weights(X: torch.Tensor, W13: torch.Tensor, group_offsets: torch.Tensor,
                                         Y: torch.Tensor) -> None:
    """Group g multiplied by expert g + 1's weights (an off-by-one in the group index)."""
    width, offsets, experts = Y.shape[1], group_offsets.tolist(), W13.shape[0]
    for expert in range(experts):
        start, end = offsets[expert], offsets[expert + 1]
        h = X[start:end].float() @ W13[(expert + 1) % experts].float().t()
        Y[start:end] = F.silu(h[:, :width]) * h[:, width:]


WRONG = [
    pytest.param(swiglu_of_the_up_projection, id="gate-up-swapped"),
    pytest.param(swiglu_of_interleaved_rows, id="interleaved"),
    pytest.param(swiglu_with_the_next_experts_weights, id="next-expert"),
]


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_kernel_fails_the_tolerance(wrong: Callable[..., None]) -> None:
    assert_wrong_kernel_fails(NAME, wrong, None)


# ---------------------------------------------------------------- the harness, CPU device


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(
        NAME,
        swiglu_with_the_next_experts_weights,
        tmp_path,
        "import torch\nimport torch.nn.functional as F\n",
    )
