"""layernorm and rope: the mistakes a kernel for them typically makes are caught, by the tolerance on
the CPU shapes and by the harness end to end (INCORRECT_NUMERICAL); the example and the baseline,
submitted as they are, pass.

The catalogue-wide checks (counts, inputs, baseline margins, lower precision, examples) are in
test_catalogue.py, which covers these two problems like every other.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from evaluator.problems import get_problem
from tests.evaluator.problem_checks import assert_example_and_baseline_pass, assert_wrong_kernel_fails
from tests.harness_helpers import evaluate_file

CPU = ("--device", "cpu")
LAYERNORM_EPS = 1e-5


def layernorm_without_bias(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor
) -> None:
    y.copy_(F.layer_norm(x, (x.shape[-1],), weight, None, LAYERNORM_EPS))


def layernorm_without_centring(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor
) -> None:
    """RMSNorm plus the bias: right only where the row mean happens to be ~0."""
    y.copy_(F.rms_norm(x.float(), (x.shape[-1],), weight.float(), LAYERNORM_EPS) + bias.float())


def layernorm_without_eps(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), 0.0))


def rope_interleaved(*tensors: torch.Tensor) -> None:
    """The GPT-J convention: dimension 2i pairs with 2i + 1, not i with i + D/2."""
    q, k, cos, sin, q_out, k_out = tensors
    cos, sin = cos[:, None, :], sin[:, None, :]
    for x, out in ((q, q_out), (k, k_out)):
        even, odd = x[..., 0::2].float(), x[..., 1::2].float()
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = odd * cos + even * sin


def rope_turning_backwards(*tensors: torch.Tensor) -> None:
    """rotate_half with the sign the wrong way round: a turn by -angle."""
    q, k, cos, sin, q_out, k_out = tensors
    get_problem("rope").reference_module().baseline(q, k, cos, -sin, q_out, k_out)


#: (problem, wrong kernel, the distributions that must expose it; None: every one).
WRONG = [
    pytest.param("layernorm", layernorm_without_bias, None, id="layernorm-without-bias"),
    pytest.param("layernorm", layernorm_without_centring, ("offset",), id="layernorm-without-centring"),
    pytest.param("layernorm", layernorm_without_eps, ("tiny",), id="layernorm-without-eps"),
    pytest.param("rope", rope_interleaved, None, id="rope-interleaved"),
    pytest.param("rope", rope_turning_backwards, None, id="rope-turning-backwards"),
]


@pytest.mark.parametrize(("name", "wrong", "exposed_by"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    name: str, wrong: Callable[..., None], exposed_by: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(name, wrong, exposed_by)


def submission(kernel: Callable[..., None]) -> str:
    """A submission file whose ``kernel`` is this function of the module."""
    imports = "import torch\nimport torch.nn.functional as F\n\nLAYERNORM_EPS = 1e-5\n\n\n"
    return f"{imports}{inspect.getsource(kernel)}\n\nkernel = {kernel.__name__}\n"


@pytest.mark.parametrize(
    ("name", "wrong"),
    [("layernorm", layernorm_without_bias), ("rope", rope_interleaved)],
    ids=["layernorm-without-bias", "rope-interleaved"],
)
def test_the_harness_reports_a_wrong_submission_as_incorrect(
    name: str, wrong: Callable[..., None], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}_wrong.py"
    path.write_text(submission(wrong))
    report = evaluate_file(name, path, *CPU)
    assert report["status"] == "INCORRECT_NUMERICAL", report["message"]
    assert "outside tolerance" in report["message"]


@pytest.mark.parametrize("name", ["layernorm", "rope"])
def test_the_example_and_the_baseline_pass_through_the_harness(name: str, tmp_path: Path) -> None:
    assert_example_and_baseline_pass(name, tmp_path)
