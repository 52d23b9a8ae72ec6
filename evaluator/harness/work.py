"""The child's work on one shape: correctness trials, then timing of the kernel and the baseline.

Returns plain dicts shaped like ``ShapeReport`` (the parent validates them into models).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import torch

from evaluator.harness import correctness as corr
from evaluator.harness.anticheat import trusted_torch_state
from evaluator.harness.report_status import RUNTIME_ERROR, CheckFailure
from evaluator.harness.timing import TimedSet, TimingConfig


@dataclass
class ShapeContext:
    """What the trials of one shape need; ``sync`` is a no-op on the CPU."""

    problem: Any
    refmod: Any
    axes: dict[str, int]
    shape_id: str
    device: str
    activity: Any
    sync: Callable[[], None]
    trusted: Any = None  # anticheat.TorchState captured before the import

    def ordered_inputs(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return [inputs[spec.name] for spec in self.problem.inputs]


def with_scalar_args(fn: Callable[..., Any], problem: Any, axes: dict[str, int]) -> Callable[..., Any]:
    """Bind the axes a kernel cannot read off its tensors (attention's ``causal``) as keywords."""
    kwargs = problem.call_kwargs(axes)
    return functools.partial(fn, **kwargs) if kwargs else fn


def ranked_seed(secret: int, public_seed: int, shape_id: str) -> int:
    """A seed nobody can predict without the secret: SHA-256 of (secret, public seed, shape)."""
    text = f"{secret}|{public_seed}|{shape_id}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & (2**63 - 1)


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & (2**63 - 1)


def _call_kernel(kernel: Callable[..., Any], args: list[torch.Tensor], ctx: ShapeContext) -> Any:
    try:
        returned = kernel(*args)
        ctx.sync()
    except Exception as error:
        raise CheckFailure(RUNTIME_ERROR, f"the kernel raised {type(error).__name__}: {error}") from error
    return returned


def run_trial(
    ctx: ShapeContext, kernel: Callable[..., Any], seed: int, distribution: str
) -> tuple[str, str, dict[str, Any]]:
    """One call on fresh inputs: (status, message, errors). Reference only after the call."""
    inputs = ctx.refmod.generate_inputs(dict(ctx.axes), seed, ctx.device, distribution)
    ordered = ctx.ordered_inputs(inputs)
    digests = [corr.digest(tensor) for tensor in ordered]
    input_ids = [corr.identity(tensor) for tensor in ordered]
    outputs = corr.allocate_outputs(ctx.problem.outputs, ctx.axes, ctx.device)
    output_ids = {name: corr.identity(tensor) for name, tensor in outputs.items()}
    ctx.sync()
    returned = _call_kernel(kernel, ordered + list(outputs.values()), ctx)
    problem = ctx.activity.problems(native=False)
    if problem:
        return "REJECTED", problem, {}
    for name, tensor in outputs.items():
        bad = corr.check_identity(name, tensor, output_ids[name])
        if bad:
            return bad[0].value, bad[1], {}
    for spec, tensor, before, ident in zip(ctx.problem.inputs, ordered, digests, input_ids):
        if corr.check_identity(spec.name, tensor, ident) or corr.digest(tensor) != before:
            return "REJECTED", f"the kernel modified its input {spec.name} (class 7)", {}
    message = (
        f"kernel returned a {type(returned).__name__}; ignored (outputs are written in place)"
        if returned is not None
        else ""
    )
    errors = compare_outputs(ctx, inputs, outputs)
    passed = corr.outputs_pass(errors, ctx.problem)
    if not passed:
        message = (message + "; " if message else "") + describe_failure(errors)
    return ("PASSED" if passed else "INCORRECT_NUMERICAL"), message, errors


def compare_outputs(
    ctx: ShapeContext, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]
) -> dict[str, Any]:
    """Reference (computed now, after the call), comparison, then the reference is poisoned."""
    with trusted_torch_state(ctx.trusted):
        references = dict(ctx.refmod.reference(inputs, dict(ctx.axes)))
    try:
        return {
            name: corr.compare(name, outputs[name], references[name], ctx.problem.tolerance_for(name))
            for name in outputs
        }
    finally:
        corr.poison_and_release(references)


def describe_failure(errors: dict[str, Any]) -> str:
    parts = []
    for name, stats in errors.items():
        parts.append(
            f"{name}: matched {stats['matched_ratio']:.6f}, nonfinite {stats['nonfinite_count']}, "
            f"max abs error {stats['max_abs_error']}"
        )
    return "outside tolerance: " + "; ".join(parts)


def correctness(
    ctx: ShapeContext, kernel: Callable[..., Any], seeds: list[tuple[int, int | None]]
) -> tuple[str, str, list[dict[str, Any]]]:
    """All trials of a shape (stops at the first failure): (status, message, checks)."""
    checks = []
    for seed, public in seeds:
        for distribution in ctx.problem.distributions:
            label = (
                f"seed {public} / {distribution}" if public is not None else f"secret seed / {distribution}"
            )
            status, message, errors = run_trial(ctx, kernel, seed, distribution)
            checks.append(
                {
                    "trial": label,
                    "distribution": distribution,
                    "seed": public,
                    "passed": status == "PASSED",
                    "status": status,
                    "message": message,
                    "errors": errors,
                }
            )
            if status != "PASSED":
                return status, f"{label}: {message}", checks
    notes = sorted({check["message"] for check in checks if check["message"]})
    return "PASSED", "; ".join(notes), checks


# ---------------------------------------------------------------- timed input sets


def set_count(ctx: ShapeContext, cap_bytes: int) -> int:
    """As many rotating input sets as fit ``cap_bytes``: at least 2, at most 8."""
    sizes = []
    for spec in list(ctx.problem.inputs) + list(ctx.problem.outputs):
        numel = 1
        for dim in spec.concrete_shape(ctx.axes):
            numel *= dim
        sizes.append(numel * torch.empty((), dtype=corr.torch_dtype(spec.dtype)).element_size())
    return int(min(max(cap_bytes // max(sum(sizes), 1), 2), 8))


def build_sets(ctx: ShapeContext, count: int) -> list[TimedSet]:
    distribution = ctx.problem.distributions[0]
    sets = []
    for _ in range(count):
        inputs = ctx.refmod.generate_inputs(dict(ctx.axes), fresh_seed(), ctx.device, distribution)
        outputs = corr.allocate_outputs(ctx.problem.outputs, ctx.axes, ctx.device)
        sets.append(_timed_set(ctx, inputs, outputs, distribution))
    return sets


def _timed_set(
    ctx: ShapeContext, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor], distribution: str
) -> TimedSet:
    def refresh() -> None:
        fresh = ctx.refmod.generate_inputs(dict(ctx.axes), fresh_seed(), ctx.device, distribution)
        for name, tensor in inputs.items():
            tensor.copy_(fresh[name])
        fresh.clear()

    def verify() -> str | None:
        errors = compare_outputs(ctx, inputs, outputs)
        if corr.outputs_pass(errors, ctx.problem):
            return None
        return describe_failure(errors)

    return TimedSet(ctx.ordered_inputs(inputs), list(outputs.values()), refresh, verify)


def release_sets(sets: list[TimedSet]) -> None:
    """Poison every output (the baseline's correct answers) before the memory is reused."""
    for timed in sets:
        for tensor in timed.outputs:
            corr.poison_(tensor)
    sets.clear()


def timing_config(budget_s: float) -> TimingConfig:
    return TimingConfig(budget_s=budget_s)


def elapsed(since: float) -> float:
    return perf_counter() - since
