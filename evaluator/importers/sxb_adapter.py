"""A SOL-ExecBench definition behind SOLboard's contract: ``run(*inputs) -> outputs`` is the
reference, random inputs are drawn as SOL-ExecBench draws them (``sxb_inputs``), custom ones come
from the definition's ``custom_inputs_entrypoint`` (adapter.json, docs/importing.md)."""

from __future__ import annotations

from typing import Any

import torch

from evaluator.importers.runtime import Adapter, on_device, widened
from evaluator.importers.sxb_inputs import random_input
from evaluator.problems._sampling import derived_seed


class SolExecBenchAdapter(Adapter):
    """adapter.json: ``parameters`` (each input of ``run`` in order: a tensor, a fixed value, or an
    integer or boolean scalar carried as an axis), ``outputs``, ``custom_entrypoint``, ``op_type``."""

    def call_args(self, tensors: dict[str, Any], axes: dict[str, int]) -> list[Any]:
        """The arguments of ``run`` (or of a solution's entry point) in the definition's order."""
        args: list[Any] = []
        for parameter in self.spec["parameters"]:
            kind = parameter["kind"]
            if kind == "tensor":
                args.append(tensors[parameter["name"]])
            elif kind == "fixed":
                args.append(parameter["value"])
            else:
                value = int(axes[parameter["axis"]])
                args.append(bool(value) if parameter.get("type") == "bool" else value)
        return args

    def _scalars(self, axes: dict[str, int]) -> dict[str, Any]:
        scalars: dict[str, Any] = {}
        for parameter in self.spec["parameters"]:
            if parameter["kind"] == "fixed":
                scalars[parameter["name"]] = parameter["value"]
            elif parameter["kind"] == "axis":
                value = int(axes[parameter["axis"]])
                scalars[parameter["name"]] = bool(value) if parameter.get("type") == "bool" else value
        return scalars

    def named(self, result: Any, like: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """``run``'s result by output name (a dict, a tuple in order, or the one output)."""
        names = list(self.spec["outputs"])
        if isinstance(result, dict):
            missing = [name for name in names if name not in result]
            if missing:
                raise ValueError(f"the reference returned no {missing}")
            return {name: self._output(name, result[name], like) for name in names}
        if isinstance(result, (tuple, list)):
            if len(result) != len(names):
                raise ValueError(f"the reference returned {len(result)} values for outputs {names}")
            return {name: self._output(name, value, like) for name, value in zip(names, result, strict=False)}
        if len(names) != 1:
            raise ValueError(f"the reference returned one value for outputs {names}")
        return {names[0]: self._output(names[0], result, like)}

    def custom_inputs(
        self, axes: dict[str, int], seed: int, device: Any, distribution: str
    ) -> dict[str, Any]:
        """The definition's custom_inputs_entrypoint at these axes (tensors and custom scalars)."""
        entry = getattr(self.upstream, self.spec["custom_entrypoint"])
        with on_device(self.family, device, self._seed(seed, distribution, axes, "custom_inputs")):
            return dict(entry({**axes, **self._scalars(axes)}, torch.device(device)))

    def generate_inputs(
        self, axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "upstream"
    ) -> dict[str, torch.Tensor]:
        self._check_distribution(distribution)
        specs = {item["name"]: item for item in self.spec["parameters"] if item["kind"] == "tensor"}
        custom = {}
        if any(item["source"] == "custom" for item in specs.values()):
            custom = self.custom_inputs(axes, seed, device, distribution)
        inputs: dict[str, torch.Tensor] = {}
        for spec in self.problem.inputs:
            item = specs[spec.name]
            if item["source"] == "custom":
                if not isinstance(custom.get(spec.name), torch.Tensor):
                    raise ValueError(f"custom_inputs_entrypoint gave no tensor {spec.name!r}")
                tensor = custom[spec.name].to(device)
            else:
                gen = torch.Generator(device=device)
                gen.manual_seed(derived_seed(seed, distribution, axes, spec.name))
                tensor = random_input(
                    spec.name,
                    spec.concrete_shape(axes),
                    getattr(torch, spec.dtype),
                    device,
                    gen,
                    item.get("description"),
                    self.spec.get("op_type"),
                )
            inputs[spec.name] = tensor.contiguous()
        return inputs

    def _results(
        self, inputs: dict[str, torch.Tensor], axes: dict[str, int], wide: bool
    ) -> dict[str, torch.Tensor]:
        like = next(iter(inputs.values()), None)
        tensors = {name: widened(value) if wide else value for name, value in inputs.items()}
        with on_device(self.family, like.device if like is not None else "cpu"), torch.no_grad():
            result = self.upstream.run(*self.call_args(tensors, axes))
        return self.named(result, like)

    def _into(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor],
              scalars: dict[str, int]) -> dict[str, torch.Tensor]:
        return self._results(inputs, scalars, False)
