"""The second formulation that holds an imported problem's tolerance to account.

An imported problem's baseline IS its reference (the upstream code, its result copied into the
outputs), so the usual self-check, baseline against reference, passes by construction. The check
that means something: the same upstream code run on float64 copies of the floating inputs, its
result rounded to each output's declared dtype (the best any kernel can write), must be within the
tolerance of the baseline. If it is not, the tolerance is tighter than the reference's own
rounding, and a kernel more exact than the reference would fail.

Such a tolerance is widened rather than refused (``Shortfall``, turned into factors by
``widening`` and applied by the worker): the measurement gives the least factor by which atol alone,
or atol and rtol together, must grow for the baseline to meet the tolerance against the float64
formulation, and the import multiplies every tolerance of the problem by it times
``SAFETY_FACTOR``, keeps upstream's figures beside them and says so in the description. Only a
tolerance that no factor can fix (an exact check of values the reference rounds, a non-finite value
the float64 run does not reproduce) or one whose rtol would exceed ``MAX_WIDENED_RTOL`` is refused.

The report says whether the two were identical (a correctly rounded reference, or code that fixes
its own dtypes and computes the same thing both times: then the check proves little), differed
within the tolerance, or needed the widened one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from evaluator.harness.correctness import allocate_outputs
from evaluator.importers.common import Refused
from evaluator.problems import Problem, Shape

#: How much wider than the measured need a widened tolerance is: 2 because a kernel as exact as the
#: reference but rounding the other way is compared with the reference, not with the exact result
#: (up to twice the reference's own error), and 2 again for the seeds and larger shapes the import
#: does not measure (the float64 run is made at the smallest CPU shape only).
SAFETY_FACTOR = 4.0
#: A widened relative tolerance above this compares little: such a problem is refused instead.
MAX_WIDENED_RTOL = 0.25


@dataclass(frozen=True)
class Shortfall:
    """Where the baseline missed the tolerance against the float64 formulation, and the least
    factor (``need``) by which that tolerance must grow for it to pass; ``need`` is infinite when
    no factor does (an exact check, or a non-finite value the float64 run does not reproduce)."""

    where: str
    output: str
    matched: float
    matched_ratio: float
    atol: float
    rtol: float
    need: float
    #: The least factor for atol alone (rtol kept); inf when atol is 0 or no factor does.
    need_atol: float = math.inf
    #: Whether atol alone, widened (times SAFETY_FACTOR), stays below what rtol allows at an element
    #: of the output's RMS size: the check stays relative for typical elements, and only values near
    #: zero (where cancellation leaves an error relative to the inputs, not the result) get the floor.
    atol_room: bool = False

    def merge(self, other: Shortfall) -> Shortfall:
        """Both misses at once: the larger needs, room for atol alone only where both have it."""
        worst = self if self.need >= other.need else other
        return replace(worst, need=max(self.need, other.need), need_atol=max(self.need_atol, other.need_atol),
                       atol_room=self.atol_room and other.atol_room)

    def text(self) -> str:
        return (
            f"at {self.where} its {self.output} matches {self.matched:.4f} of the same code run in float64 "
            f"(needs {self.matched_ratio:g} under atol {self.atol:g}, rtol {self.rtol:g})"
        )


class TighterThanRounding(Refused):
    """The tolerance is tighter than the reference's own rounding (``shortfall`` says by how much)."""

    def __init__(self, shortfall: Shortfall) -> None:
        self.shortfall = shortfall
        super().__init__(
            f"the tolerance (atol {shortfall.atol:g}, rtol {shortfall.rtol:g}) is tighter than the "
            f"reference's own rounding: {shortfall.text()}, so a more exact kernel would fail; widen the "
            "tolerance upstream (or, for reference-kernels, with --atol/--rtol)"
        )


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


def _need(got: torch.Tensor, expected: torch.Tensor, allowed: torch.Tensor | float, ratio: float,
          kept: torch.Tensor | float = 0.0) -> float:
    """The least factor k such that ``kept + k * allowed`` matches ``ratio`` of the elements; inf
    when none does. With ``kept`` 0 and ``allowed`` the whole allowed error (linear in atol and
    rtol), k is the factor both must grow by; with ``kept`` the rtol part and ``allowed`` atol, the
    factor for atol alone."""
    flat_got, flat_expected = got.reshape(-1), expected.reshape(-1)
    flat_allowed = torch.broadcast_to(torch.as_tensor(allowed, dtype=torch.float64), expected.shape).reshape(
        -1
    )
    flat_kept = torch.broadcast_to(torch.as_tensor(kept, dtype=torch.float64), expected.shape).reshape(-1)
    error = ((flat_got - flat_expected).abs() - flat_kept).clamp_min(0.0)
    finite = torch.isfinite(flat_expected)
    same = (flat_got == flat_expected) | (torch.isnan(flat_got) & torch.isnan(flat_expected))
    per_element = torch.where(error == 0, torch.zeros_like(error), error / flat_allowed)
    per_element = torch.where(torch.isnan(per_element), math.inf, per_element)
    per_element = torch.where(finite, per_element, torch.where(same, 0.0, math.inf))
    count = per_element.numel()
    if count == 0:
        return 0.0
    needed = min(count, max(1, math.ceil(ratio * count - 1e-9)))
    return float(torch.sort(per_element).values[needed - 1])


def check_independent(problem: Problem, module: Any, shape: Shape, distribution: str,
                      inputs: dict[str, torch.Tensor]) -> str:
    """``identical``, ``within`` (the tolerance) or why there is no second formulation;
    ``TighterThanRounding`` (with the least widening that passes) when the baseline misses the
    tolerance against it."""
    where = f"{shape.shape_id} ({distribution})"
    axes = dict(shape.axes)
    independent = getattr(module, "independent_reference", None)
    if independent is None:
        return "no float64 formulation (the problem has none)"
    try:
        wide = independent(inputs, axes)
    except Exception as error:  # code that refuses float64 inputs: no second formulation
        return f"no float64 formulation (the reference refuses float64 inputs: {type(error).__name__})"
    outputs = allocate_outputs(problem.outputs, axes, "cpu")
    module.baseline(*inputs.values(), *outputs.values(), **problem.call_kwargs(axes))
    identical = True
    worst: Shortfall | None = None
    for spec in problem.outputs:
        expected = _rounded(wide[spec.name].reshape(outputs[spec.name].shape), spec.dtype)
        got = outputs[spec.name].to(torch.float64)
        identical &= bool(torch.equal(got, expected))
        tolerance = problem.tolerance_for(spec.name, axes)
        allowed = tolerance.allowed_error(expected)
        matched = _matched(got, expected, allowed)
        if matched < tolerance.matched_ratio:
            ratio = tolerance.matched_ratio
            relative = (
                tolerance.allowed_error(expected) - tolerance.atol
                if tolerance.atol_scale == "absolute"
                else None
            )
            need_atol = (_need(got, expected, tolerance.atol, ratio, relative)
                         if relative is not None and tolerance.atol > 0 else math.inf)
            rms = (
                float(expected[torch.isfinite(expected)].square().mean().sqrt()) if expected.numel() else 0.0
            )
            room = SAFETY_FACTOR * need_atol * tolerance.atol <= tolerance.rtol * rms
            found = Shortfall(where, spec.name, matched, ratio, tolerance.atol, tolerance.rtol,
                              _need(got, expected, allowed, ratio), need_atol, room)
            worst = found if worst is None else worst.merge(found)
    if worst is not None:
        raise TighterThanRounding(worst)
    return "identical" if identical else "within"


def _rounded_up(value: float) -> float:
    """``value`` rounded up to two significant digits."""
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return math.ceil(value / step - 1e-9) * step


def widening(shortfall: Shortfall) -> dict[str, float]:
    """The factors every atol and every rtol of the problem are multiplied by: atol's alone where
    that leaves room (``Shortfall.atol_room``), else both by the same factor; each the measured need
    times ``SAFETY_FACTOR``, rounded up to two significant digits. Refused when no factor helps or
    the widened rtol would compare little."""
    if shortfall.atol_room and math.isfinite(shortfall.need_atol):
        return {"atol": _rounded_up(shortfall.need_atol * SAFETY_FACTOR), "rtol": 1.0}
    if not math.isfinite(shortfall.need):
        raise TighterThanRounding(shortfall)
    factor = _rounded_up(shortfall.need * SAFETY_FACTOR)
    if shortfall.rtol * factor > MAX_WIDENED_RTOL:
        raise Refused(
            f"the tolerance (atol {shortfall.atol:g}, rtol {shortfall.rtol:g}) is tighter than the "
            f"reference's own rounding: {shortfall.text()}, and the widening that would pass it "
            f"(x{factor:.3g}: rtol {shortfall.rtol * factor:.3g}) compares little; widen the tolerance "
            "upstream (or, for reference-kernels, with --atol/--rtol)"
        )
    return {"atol": factor, "rtol": factor}
