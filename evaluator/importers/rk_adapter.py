"""A GPU MODE reference-kernels task behind SOLboard's contract: ``generate_input(**spec)`` makes
the data, ``ref_kernel(data)`` is the reference (adapter.json, docs/importing.md).

The data is any structure of tensors and plain values (``layout.py``): its tensor leaves are the
problem's inputs and outputs by name, its other leaves constants recorded per shape at import.
"""

from __future__ import annotations

from typing import Any

import torch

from evaluator.importers.layout import constants_key, flatten, rebuild
from evaluator.importers.runtime import Adapter, on_device, widened


class ReferenceKernelsAdapter(Adapter):
    """adapter.json: ``parameters`` of generate_input, ``distribution_parameter`` and
    ``distribution_values``, the ``data`` and ``result`` layouts, the ``constants`` per shape."""

    def kwargs(self, axes: dict[str, int], seed: int, distribution: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for parameter in self.spec["parameters"]:
            kind = parameter["kind"]
            if kind == "seed":
                kwargs[parameter["name"]] = seed
            elif kind == "fixed":
                kwargs[parameter["name"]] = parameter["value"]
            else:
                value = int(axes[parameter["axis"]])
                kwargs[parameter["name"]] = bool(value) if parameter.get("type") == "bool" else value
        selector = self.spec.get("distribution_parameter")
        if selector:
            kwargs[selector] = self.spec["distribution_values"][distribution]
        return kwargs

    def upstream_data(
        self, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str
    ) -> Any:
        """The upstream ``generate_input`` result, drawn on ``device`` with this (upstream) seed."""
        generate = getattr(self.upstream, self.spec.get("generate", "generate_input"))
        with on_device(self.family, device, seed), torch.no_grad():
            return generate(**self.kwargs(axes, seed, distribution))

    def generate_inputs(
        self, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "upstream"
    ) -> dict[str, torch.Tensor]:
        self._check_distribution(distribution)
        data = self.upstream_data(
            axes, self._seed(seed, distribution, axes, "generate_input"), device, distribution
        )
        leaves = flatten(data)
        slots = self.spec["data"]["slots"]
        if len(leaves) != len(slots):
            raise ValueError(f"generate_input gave {len(leaves)} values where the import saw {len(slots)}")
        inputs = {}
        for slot, item in zip(slots, leaves, strict=False):
            if slot["role"] == "input":
                if not isinstance(item, torch.Tensor):
                    raise ValueError(
                        f"generate_input: {slot['name']} is a {type(item).__name__}, not a tensor"
                    )
                inputs[slot["name"]] = item.to(device).contiguous()
        return inputs

    def constants(self, axes: dict[str, int]) -> list[Any]:
        """The data's plain values at a shape (recorded at import)."""
        table = self.spec.get("constants") or {}
        if not any(slot["role"] == "constant" for slot in self.spec["data"]["slots"]):
            return []
        key = constants_key({name: int(axes[name]) for name in self.problem.axes})
        if key not in table:
            raise ValueError(f"no recorded constants at {key}: the task's data has plain values per shape")
        return list(table[key])

    def data(
        self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor], axes: dict[str, int]
    ) -> Any:
        """The upstream data structure holding these inputs and output buffers."""
        return rebuild(self.spec["data"], {**inputs, **outputs}, self.constants(axes))

    def results(
        self, value: Any, outputs: dict[str, torch.Tensor], like: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """ref_kernel's (or custom_kernel's) result by output name, reshaped to the buffers."""
        slots = [slot for slot in self.spec["result"]["slots"] if slot["role"] != "constant"]
        tensors = [
            item for item in flatten(value) if not isinstance(item, (bool, int, float, str, type(None)))
        ]
        if len(tensors) != len(slots):
            raise ValueError(f"the result holds {len(tensors)} tensors, not the {len(slots)} outputs "
                             f"({', '.join(slot['name'] for slot in slots if slot['role'] == 'output')})")
        named = {}
        for slot, item in zip(slots, tensors, strict=False):
            if slot["role"] != "output":
                continue
            tensor = self._output(slot["name"], item, like)
            buffer = outputs.get(slot["name"])
            if buffer is not None and tensor.shape != buffer.shape and tensor.numel() == buffer.numel():
                tensor = tensor.reshape(buffer.shape)  # a result of shape () for a buffer of shape (1,)
            named[slot["name"]] = tensor
        return named

    def _call(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor],
              axes: dict[str, int]) -> dict[str, torch.Tensor]:
        like = next(iter(inputs.values()), None)
        reference = getattr(self.upstream, self.spec.get("reference", "ref_kernel"))
        with on_device(self.family, like.device if like is not None else "cpu"), torch.no_grad():
            result = reference(self.data(inputs, outputs, axes))
        return self.results(result, outputs, like)

    def buffers(
        self, axes: dict[str, int], device: torch.device, wide: bool = False
    ) -> dict[str, torch.Tensor]:
        return {
            spec.name: torch.zeros(
                spec.concrete_shape(axes),
                device=device,
                dtype=widened(torch.empty(0, dtype=getattr(torch, spec.dtype))).dtype
                if wide
                else getattr(torch, spec.dtype),
            )
            for spec in self.problem.outputs
        }

    def _results(
        self, inputs: dict[str, torch.Tensor], axes: dict[str, int], wide: bool
    ) -> dict[str, torch.Tensor]:
        device = self._device_of(inputs.values())
        tensors = {name: widened(value) if wide else value for name, value in inputs.items()}
        return self._call(tensors, self.buffers(axes, device, wide), axes)

    def axes_of_call(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor],
                     scalars: dict[str, int]) -> dict[str, int]:
        """The axes of a call that passes only tensors: the one shape whose declared sizes match
        (or any of several that share the same constants). Cached: the baseline is timed."""
        tensors = {**inputs, **outputs}
        key = (tuple(tuple(tensor.shape) for tensor in tensors.values()), tuple(sorted(scalars.items())))
        cache: dict[Any, dict[str, int]] = self.__dict__.setdefault("_axes_cache", {})
        if key not in cache:
            cache[key] = self._match_axes(tensors, scalars)
        return cache[key]

    def _match_axes(self, tensors: dict[str, torch.Tensor], scalars: dict[str, int]) -> dict[str, int]:
        matching = [shape.axes for shape in self.problem.shapes
                    if all(shape.axes.get(name) == value for name, value in scalars.items())
                    and all(tuple(tensors[spec.name].shape) == spec.concrete_shape(shape.axes)
                            for spec in list(self.problem.inputs) + list(self.problem.outputs))]
        if not matching:
            raise ValueError("the tensors' sizes match none of the problem's shapes")
        if len({constants_key(axes) for axes in matching}) > 1 and self.spec.get("constants"):
            distinct = {repr(self.constants(axes)) for axes in matching}
            if len(distinct) > 1:
                raise ValueError("the tensors' sizes match several shapes whose constants differ")
        return dict(matching[0])

    def _into(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor],
              scalars: dict[str, int]) -> dict[str, torch.Tensor]:
        return self._call(inputs, outputs, self.axes_of_call(inputs, outputs, scalars))
