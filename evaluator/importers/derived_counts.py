"""Counts without a hand: flops by class and compulsory bytes of a problem's reference, derived
by running it (docs/importing.md, "Derived counts").

- Flops: the reference runs under a dispatch mode that sees every aten op. Matrix products,
  convolutions and attention are counted with torch's own formulas (``torch.utils.flop_counter``,
  the ones ``FlopCounterMode`` uses: exact for what the reference computes) and put in the tensor
  class of their operands' dtype. Elementwise ops (aten's ``pointwise`` tag) count one flop per
  output element and reductions one per element read, in fp32 SIMT (fp64 when they compute in
  fp64): loose, because they follow how the reference is written (an upcast, an extra temporary).
- Bytes: the compulsory traffic: every declared input read once and every declared output written
  once. A lower bound; loose where no kernel can avoid intermediates (a softmax that does not fit
  on chip) and where an input need not be read in full.

Run on fake tensors (no memory, no arithmetic), so a shape of any size costs milliseconds; a
reference whose control flow needs real values (``.item()``) is counted on real tensors at shapes
small enough for the CPU, and left without counts (unranked) at the others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

#: The tensor-core class of a matrix product by its operands' dtype. fp32 products count as tf32:
#: the fastest way the hardware does them, so t_SOL stays a lower bound (a kernel that must keep
#: full fp32 accuracy runs 3xTF32 or SIMT, up to 3x and 7x slower); int8 runs at the fp8 rate.
TENSOR_CLASS = {
    torch.bfloat16: "bf16_tensor", torch.float16: "fp16_tensor", torch.float32: "tf32_tensor",
    torch.float64: "fp64", torch.float8_e4m3fn: "fp8_tensor", torch.float8_e5m2: "fp8_tensor",
    torch.int8: "fp8_tensor", torch.uint8: "fp8_tensor",
}  # fmt: skip
#: Pointwise-tagged ops that move or select values rather than compute them.
NOT_ARITHMETIC = {
    aten.clone, aten.where, aten.masked_fill, aten._to_copy, aten.copy_, aten.fill_, aten.zero_,
    aten.lift_fresh, aten.bitwise_not, aten.logical_not, aten.masked_fill_, aten.fill,
}  # fmt: skip
#: Fused CPU kernels that are neither tagged pointwise nor reduction: flops per element of their
#: first input (softmax: max, subtract-exp, sum, divide; layer norm: mean, variance, normalise, scale
#: and shift).
PER_ELEMENT = {aten._softmax: 4, aten._log_softmax: 4, aten.native_layer_norm: 7, aten.native_group_norm: 7,
               aten._fused_rms_norm: 4, aten.logsumexp: 3}
#: Attention ops whose ``is_causal`` argument (positional index 4 where given) halves the work.
_ATTENTION = {aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_flash_attention,
              aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_cudnn_attention}


def _numel(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return sum(_numel(item) for item in value)
    return 0


def _first_tensor(values: Any) -> torch.Tensor | None:
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (tuple, list)):
            found = _first_tensor(value)
            if found is not None:
                return found
    return None


def _attention_flops(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    query, key, value = args[:3]
    flops = flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape)
    causal = bool(kwargs.get("is_causal", args[4] if len(args) > 4 else False))
    if causal and query.shape[-2] == key.shape[-2]:  # the lower triangle with its diagonal
        keys = key.shape[-2]
        flops = flops * (keys + 1) // (2 * keys)
    return int(flops)


class ClassCounter(TorchDispatchMode):
    """Flops by SOLboard class of every op run inside it (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.flops: dict[str, float] = defaultdict(float)
        self.attention_with_mask = False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self._count(func, args, kwargs, out)
        return out

    def _count(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        packet = func.overloadpacket
        operand = _first_tensor(args)
        if operand is None:
            return
        if packet in _ATTENTION:
            self.attention_with_mask |= kwargs.get("attn_mask") is not None
            self.flops[TENSOR_CLASS.get(operand.dtype, "fp32_simt")] += _attention_flops(args, kwargs)
        elif packet in flop_counter.flop_registry:
            formula: Callable[..., int] = flop_counter.flop_registry[packet]
            flops = formula(*args, **kwargs, out_val=out)
            self.flops[TENSOR_CLASS.get(operand.dtype, "fp32_simt")] += float(flops)
        elif packet in PER_ELEMENT:
            self.flops[self._simt_class(operand)] += PER_ELEMENT[packet] * operand.numel()
        elif torch.Tag.pointwise in func.tags and packet not in NOT_ARITHMETIC:
            self.flops[self._simt_class(out)] += _numel(out)
        elif torch.Tag.reduction in func.tags:
            self.flops[self._simt_class(operand)] += operand.numel()

    @staticmethod
    def _simt_class(value: Any) -> str:
        tensor = _first_tensor([value])
        return "fp64" if tensor is not None and tensor.dtype == torch.float64 else "fp32_simt"


def count_flops(call: Callable[[], Any]) -> tuple[dict[str, float], bool]:
    """(flops by class of ``call()``, whether it ran attention with an explicit mask tensor)."""
    counter = ClassCounter()
    with counter:
        call()
    return {
        key: float(value) for key, value in sorted(counter.flops.items()) if value > 0
    }, counter.attention_with_mask


def compulsory_bytes(problem: Any, axes: dict[str, int]) -> float:
    """Every declared input read once, every declared output written once."""
    total = 0
    for spec in list(problem.inputs) + list(problem.outputs):
        numel = 1
        for size in spec.concrete_shape(axes):
            numel *= size
        total += numel * torch.empty(0, dtype=getattr(torch, spec.dtype)).element_size()
    return float(total)
