"""How an upstream data structure maps onto SOLboard's flat list of tensors, and back.

GPU MODE tasks pass one ``data`` value to ``ref_kernel`` and ``custom_kernel``: a tensor, a tuple
of tensors (``(A, B, output)``) or a nested structure (``(input, mask, weights: dict, config:
dict)``). torch's pytree flattens it into leaves with paths: every tensor leaf becomes a named
input or output of the problem, every other leaf (a config's integers, a string) is a constant of
the shape, recorded per shape at import. ``Layout`` is the JSON-ready description that adapter.json
stores; ``rebuild`` puts tensors and constants back into the structure the upstream code expects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

#: Constants a layout may hold (JSON values): anything else (an object, a dtype) is refused.
_CONSTANT_TYPES = (bool, int, float, str, type(None))


class LayoutError(ValueError):
    """The structure cannot be described (a leaf that is neither a tensor nor a JSON value)."""


def path_text(path: tuple[Any, ...]) -> list[str]:
    """The parts of a pytree key path: tuple indices and dict keys, as text."""
    parts = []
    for key in path:
        if isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        else:
            parts.append(re.sub(r"\W+", "_", str(key)).strip("_"))
    return parts


@dataclass
class Leaf:
    """One leaf of an upstream structure as probed: a tensor's shape and dtype, or a constant."""

    path: list[str]
    shape: tuple[int, ...] | None = None  # None: a constant
    dtype: str | None = None
    value: Any = None

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


def probe_leaves(value: Any, what: str) -> tuple[str, list[Leaf]]:
    """(serialised tree spec, leaves) of an upstream value; LayoutError for a leaf that is neither a
    tensor nor a JSON constant."""
    flat, spec = pytree.tree_flatten_with_path(value)
    leaves = []
    for path, item in flat:
        where = "/".join(path_text(path)) or "the value"
        if isinstance(item, torch.Tensor):
            leaves.append(Leaf(path_text(path), tuple(item.shape), str(item.dtype).removeprefix("torch.")))
        elif isinstance(item, _CONSTANT_TYPES):
            leaves.append(Leaf(path_text(path), value=item))
        else:
            raise LayoutError(
                f"{what} holds a {type(item).__name__} at {where}: only tensors, tuples, lists, "
                "dicts and plain values (numbers, strings) convert"
            )
    try:
        text = pytree.treespec_dumps(spec)
    except Exception as error:
        raise LayoutError(f"{what}: its structure cannot be described ({error})") from error
    return text, leaves


def signature(spec: str, leaves: list[Leaf]) -> str:
    """What must be the same at every shape: the structure, which leaves are tensors, their dtypes
    and ranks (sizes may follow the axes)."""
    kinds = [(leaf.path, leaf.dtype, len(leaf.shape or ())) if leaf.is_tensor else (leaf.path, "constant")
             for leaf in leaves]
    return json.dumps([spec, kinds])


def unflatten(spec: str, leaves: list[Any]) -> Any:
    return pytree.tree_unflatten(leaves, pytree.treespec_loads(spec))


def flatten(value: Any) -> list[Any]:
    return pytree.tree_leaves(value)


def rebuild(layout: dict[str, Any], tensors: dict[str, torch.Tensor], constants: list[Any]) -> Any:
    """The upstream structure: ``layout["slots"]`` in order, each a named tensor (input or output)
    or the next of ``constants``."""
    leaves: list[Any] = []
    pending = iter(constants)
    for slot in layout["slots"]:
        leaves.append(tensors[slot["name"]] if slot["role"] != "constant" else next(pending))
    return unflatten(layout["spec"], leaves)


def constants_key(axes: dict[str, int]) -> str:
    """The key under which a shape's constants are stored in adapter.json."""
    return json.dumps(dict(sorted(axes.items())), separators=(",", ":"))
