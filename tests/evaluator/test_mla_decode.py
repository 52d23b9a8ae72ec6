"""mla_decode beyond the catalogue-wide checks of test_catalogue.py: its byte count (only the T
cached latents), the mistakes an MLA decode kernel typically makes (caught on the CPU shapes),
bf16 scores failing, and the harness on the CPU development device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from evaluator.problems import get_problem
from tests.evaluator.problem_checks import (
    assert_example_and_baseline_pass,
    assert_harness_reports_incorrect,
    assert_wrong_kernel_fails,
)

NAME = "mla_decode"


def test_bytes_count_the_cached_tokens_latents_not_the_whole_cache() -> None:
    problem = get_problem(NAME)
    for shape in problem.shapes:
        b, h, t = shape.axes["B"], shape.axes["H"], shape.axes["T"]
        expected = 2 * (b * h * 576 + t * 576 + b * h * 512) + 4 * b
        assert problem.counts(shape.axes).bytes == expected, shape.shape_id
        lengths = problem.reference_module().sequence_lengths(shape.axes, 1)
        assert sum(lengths) == t and max(lengths) <= shape.axes["S"], shape.shape_id


# ---------------------------------------------------------------- wrong kernels


def mla_with_bf16_scores(
    q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """Hugging Face's way: the scores of a bf16 matmul (rounded to bf16), then an fp32 softmax."""
    for row, length in enumerate(seq_lens.tolist()):
        cache = kv[row, :length]
        scores = (q[row] @ cache.t()).float() / 192**0.5
        out[row] = torch.softmax(scores, dim=-1).to(q.dtype) @ cache[:, :512]


def mla_over_the_whole_cache(
    q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """seq_lens ignored: every slot of the cache attended to."""
    cache = kv.float()
    probs = torch.softmax(q.float() @ cache.transpose(1, 2) / 192**0.5, dim=-1)
    out.copy_(probs @ cache[:, :, :512])


def mla_without_the_rope_dims(
    q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
) -> None:
    """Scores from the 512 latent dims only: the 64 decoupled RoPE dims left out."""
    for row, length in enumerate(seq_lens.tolist()):
        cache = kv[row, :length].float()
        probs = torch.softmax(q[row, :, :512].float() @ cache[:, :512].t() / 192**0.5, dim=-1)
        out[row] = probs @ cache[:, :512]


def mla_scaled_by_the_latent_width(q: torch.Tensor, kv: torch.Tensor, seq_lens: torch.Tensor,
                                   out: torch.Tensor) -> None:
    """Scores scaled by 1/sqrt(576) (the absorbed width) instead of the model's 1/sqrt(192)."""
    for row, length in enumerate(seq_lens.tolist()):
        cache = kv[row, :length].float()
        probs = torch.softmax(q[row].float() @ cache.t() / 576**0.5, dim=-1)
        out[row] = probs @ cache[:, :512]


WRONG = [
    pytest.param(mla_with_bf16_scores, ("outliers", "peaked"), id="bf16-scores"),
    pytest.param(mla_over_the_whole_cache, None, id="past-seq-lens"),
    pytest.param(mla_without_the_rope_dims, None, id="no-rope-dims"),
    pytest.param(mla_scaled_by_the_latent_width, None, id="wrong-scale"),
]


@pytest.mark.parametrize(("wrong", "exposed_by"), WRONG)
def test_a_wrong_kernel_fails_the_tolerance(
    wrong: Callable[..., None], exposed_by: tuple[str, ...] | None
) -> None:
    assert_wrong_kernel_fails(NAME, wrong, exposed_by)


# ---------------------------------------------------------------- the harness, CPU device


def test_the_example_and_the_baseline_pass_through_the_harness(tmp_path: Path) -> None:
    assert_example_and_baseline_pass(NAME, tmp_path)


def test_the_harness_reports_a_wrong_submission_as_incorrect(tmp_path: Path) -> None:
    assert_harness_reports_incorrect(NAME, mla_over_the_whole_cache, tmp_path)
