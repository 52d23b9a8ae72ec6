"""The second formulation that holds an imported problem's tolerance to account.

An imported problem's baseline IS its reference (the upstream code, its result copied into the
outputs), so the usual self-check, baseline against reference, passes by construction. The check
that means something: the same upstream code run on float64 copies of the floating inputs, its
result rounded to each output's declared dtype (the best any kernel can write), must be within the
tolerance of the baseline. If it is not, the tolerance is tighter than the reference's own
rounding, and a kernel more exact than the reference would fail: the import is refused.

The report says whether the two were identical (a correctly rounded reference, or code that fixes
its own dtypes and computes the same thing both times: then the check proves little) or differed
within the tolerance.
"""

from __future__ import annotations

from typing import Any

import torch

from evaluator.harness.correctness import allocate_outputs
from evaluator.importers.common import Refused
from evaluator.problems import Problem, Shape


def _rounded(value: torch.Tensor, dtype: str) -> torch.Tensor:
    return value.to(getattr(torch, dtype)).to(torch.float64)


def _matched(got: torch.Tensor, expected: torch.Tensor, allowed: torch.Tensor) -> float:
    """The fraction of elements within the allowed error (the harness's rule: a non-finite
    reference value is matched only by the same value)."""
    finite = torch.isfinite(expected)
    close = (got - expected).abs() <= allowed
    same = (got == expected) | (torch.isnan(got) & torch.isnan(expected))
    ok = torch.where(finite, close, same)
    return float(ok.sum()) / max(ok.numel(), 1)


def check_independent(problem: Problem, module: Any, shape: Shape, distribution: str,
                      inputs: dict[str, torch.Tensor]) -> str:
    """``identical``, ``within`` (the tolerance) or why there is no second formulation; Refused
    when the baseline misses the tolerance against it."""
    where = f"{shape.shape_id} ({distribution})"
    axes = dict(shape.axes)
    independent = getattr(module, "independent_reference", None)
    if independent is None:
        return "no float64 formulation (the problem has none)"
    try:
        wide = independent(inputs, axes)
    except Exception as error:  # noqa: BLE001 - code that refuses float64 inputs: no second formulation
        return f"no float64 formulation (the reference refuses float64 inputs: {type(error).__name__})"
    outputs = allocate_outputs(problem.outputs, axes, "cpu")
    module.baseline(*inputs.values(), *outputs.values(), **problem.call_kwargs(axes))
    identical = True
    for spec in problem.outputs:
        expected = _rounded(wide[spec.name].reshape(outputs[spec.name].shape), spec.dtype)
        got = outputs[spec.name].to(torch.float64)
        identical &= bool(torch.equal(got, expected))
        tolerance = problem.tolerance_for(spec.name, axes)
        matched = _matched(got, expected, tolerance.allowed_error(expected))
        if matched < tolerance.matched_ratio:
            raise Refused(
                f"the tolerance (atol {tolerance.atol:g}, rtol {tolerance.rtol:g}) is tighter than the reference's own "
                f"rounding: at {where} its {spec.name} matches {matched:.4f} of the same code run in "
                f"float64 (needs {tolerance.matched_ratio:g}), so a more exact kernel would fail; widen the tolerance "
                "upstream (or, for reference-kernels, with --atol/--rtol)")
    return "identical" if identical else "within"
