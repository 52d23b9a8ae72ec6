"""What the judge's correctness checks and both timing loops share: the shape context, seeds, the
comparison with the reference, and the rotating input sets of the baseline's timing."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evaluator.harness import correctness as corr
from evaluator.harness.anticheat import trusted_torch_state
from evaluator.harness.timing.loop import TimedSet


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


def kernel_for_shape(
    submission: Any, problem: Any, language: str, axes: dict[str, int]
) -> Callable[..., Any]:
    """The submission's callable for one shape (a native kernel is built per shape; a Python one
    gets the problem's scalar arguments bound)."""
    kernel = submission.kernel_for(axes)
    return with_scalar_args(kernel, problem, axes) if language == "python" else kernel


def ranked_seed(secret: int, public_seed: int, shape_id: str) -> int:
    """A seed nobody can predict without the secret: SHA-256 of (secret, public seed, shape)."""
    text = f"{secret}|{public_seed}|{shape_id}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & (2**63 - 1)


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & (2**63 - 1)


def compare_outputs(
    ctx: ShapeContext, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]
) -> dict[str, Any]:
    """Reference (computed now, after the call), comparison, then the reference is poisoned."""
    with trusted_torch_state(ctx.trusted):
        references = dict(ctx.refmod.reference(inputs, dict(ctx.axes)))
        scales = error_scales(ctx.problem, ctx.refmod, inputs, ctx.axes)
    try:
        return {
            name: corr.compare(
                name,
                outputs[name],
                references[name],
                ctx.problem.tolerance_for(name, ctx.axes),
                scales.get(name),
            )
            for name in outputs
        }
    finally:
        corr.poison_and_release(references)


def error_scales(
    problem: Any, refmod: Any, inputs: dict[str, torch.Tensor], axes: Any
) -> dict[str, torch.Tensor]:
    """The reference module's error scales, for the outputs whose atol is relative to the inputs."""
    if not any(problem.tolerance_for(spec.name).atol_scale == "inputs" for spec in problem.outputs):
        return {}
    return dict(refmod.error_scale(inputs, dict(axes)))


def describe_failure(errors: dict[str, Any]) -> str:
    parts = []
    for name, stats in errors.items():
        parts.append(
            f"{name}: matched {stats['matched_ratio']:.6f}, nonfinite {stats['nonfinite_count']}, "
            f"max abs error {stats['max_abs_error']}"
        )
    return "outside tolerance: " + "; ".join(parts)


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
        if corr.outputs_pass(errors, ctx.problem, ctx.axes):
            return None
        return describe_failure(errors)

    return TimedSet(ctx.ordered_inputs(inputs), list(outputs.values()), refresh, verify)


def release_sets(sets: list[TimedSet]) -> None:
    """Poison every output (the baseline's correct answers) before the memory is reused."""
    for timed in sets:
        for tensor in timed.outputs:
            corr.poison_(tensor)
    sets.clear()
