"""Running a reference-kernels task's code to learn what its files do not declare.

- ``Upstream``: the task's modules loaded from the staging folder (a missing package is a refusal
  that names it), ``generate_input`` and ``ref_kernel`` under torch's fake tensors or for real.
- ``probe``: one spec under fake tensors: the structure, shapes and dtypes of the data and of the
  result, with no memory and no time spent on values.
- ``read_check``: the tolerance ``check_implementation`` applies at one spec, read by running it
  with ``verbose_allclose`` / ``verbose_allequal`` replaced by recorders (so a tolerance computed
  from the size, ``1e-5 * n ** 0.5``, is read at each shape).
- ``find_buffers``: which data leaves are output buffers, from one real run of the smallest spec.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evaluator.importers.common import Refused
from evaluator.importers.layout import LayoutError, Leaf, flatten, probe_leaves, unflatten
from evaluator.importers.rk_task import Parameters, Spec

UPSTREAM = "upstream"
#: Packages of AMD's ROCm stack: a task that imports one is AMD-only.
AMD_PACKAGES = ("aiter", "hip", "rocm", "triton_kernels_amd", "amdsmi")
SPIED = ("verbose_allclose", "verbose_allequal")
#: Why a check that compares nothing with the reference does not convert, and when it may.
PROPERTY_CHECK = (
    "check_implementation compares no output with verbose_allclose or verbose_allequal: it checks properties "
    "(residuals, orthogonality, structure), not closeness to the reference, and SOLboard checks every output "
    "element by element against the reference (docs/harness.md), with no property checks. An elementwise "
    "tolerance is equivalent only when the result is unique and its error does not grow with the input's "
    "conditioning (a sort, a sum): then give one with --atol and --rtol. A factorization whose result is "
    "not unique (eigenvector signs, eigenspaces) or whose forward error grows with the condition number "
    "(Cholesky, QR of ill-conditioned inputs) has no equivalent one"
)


def fake_limit(error: BaseException) -> bool:
    """An error of torch's fake tensors themselves (data-dependent shapes, ops without a fake
    kernel), as opposed to an error of the upstream code."""
    module = type(error).__module__
    if module.startswith(("torch._subclasses", "torch.fx", "torch._guards")) or "FakeTensor" in str(error):
        return True
    # torch's C++ side refuses to hand a fake tensor's values to numpy with a plain RuntimeError
    return isinstance(error, RuntimeError) and ".numpy() is not supported for tensor subclasses" in str(error)


def missing_package(error: BaseException) -> str | None:
    if isinstance(error, ModuleNotFoundError) and error.name:
        return error.name.split(".")[0]
    return None


def package_refusal(package: str, what: str) -> Refused:
    if package.startswith(AMD_PACKAGES):
        return Refused(f"{what} imports {package}, an AMD ROCm package: an AMD-only task")
    return Refused(f"{what} imports {package}, which is not installed where the import runs: install it (the "
                   "runners need it too) or import the task where it is")


class Upstream:
    """The task's generate_input, ref_kernel and check_implementation, loaded from the staging folder."""

    def __init__(self, workdir: Path, parameters: Parameters, takes_seed: bool) -> None:
        from evaluator.importers.runtime import load_upstream

        try:
            self.module, self.family = load_upstream(workdir, f"{UPSTREAM}/reference.py")
        except Exception as error:  # the upstream code itself fails to import
            package = missing_package(error)
            if package:
                raise package_refusal(package, "reference.py") from error
            raise Refused(f"reference.py does not import: {type(error).__name__}: {error}") from error
        self.parameters = parameters
        self.takes_seed = takes_seed

    def kwargs(self, spec: Spec, seed: int = 1) -> dict[str, Any]:
        kwargs = {}
        for item in self.parameters.items:
            kwargs[item["name"]] = spec.values[item["name"]] if item["kind"] == "axis" else item["value"]
        if self.parameters.distribution_parameter:
            kwargs[self.parameters.distribution_parameter] = spec.values[
                self.parameters.distribution_parameter
            ]
        if self.takes_seed:
            kwargs["seed"] = seed
        return kwargs

    def generate(self, spec: Spec, seed: int = 1) -> Any:
        from evaluator.importers.runtime import on_device

        kwargs = self.kwargs(spec, seed)
        with on_device(self.family, "cpu", seed), torch.no_grad():
            return self.module.generate_input(**kwargs)

    def reference(self, data: Any) -> Any:
        from evaluator.importers.runtime import on_device

        with on_device(self.family, "cpu"), torch.no_grad():
            return self.module.ref_kernel(data)

    def fresh_reference(self, spec: str, leaves: list[Any]) -> list[Any]:
        """ref_kernel's result leaves on copies of ``leaves`` (the data's leaves)."""
        copies = [item.clone() if isinstance(item, torch.Tensor) else item for item in leaves]
        return flatten(self.reference(unflatten(spec, copies)))


@dataclass
class Probe:
    """One spec under fake tensors (or for real where fake tensors cannot follow the code)."""

    spec: Spec
    axes: dict[str, int]
    data_spec: str
    data: list[Leaf]
    result_spec: str
    results: list[Leaf]
    real: bool = False
    tolerances: list[dict[str, float]] | None = None
    check_note: str = ""

    def data_bytes(self) -> int:
        return sum(_leaf_bytes(leaf) for leaf in self.data if leaf.is_tensor)


def _leaf_bytes(leaf: Leaf) -> int:
    numel = 1
    for size in leaf.shape or ():
        numel *= size
    return numel * torch.empty(0, dtype=getattr(torch, str(leaf.dtype))).element_size()


def probe(upstream: Upstream, spec: Spec, check: bool) -> tuple[Probe | None, int | None]:
    """(the spec under fake tensors, the bytes of its data): (None, bytes) when fake tensors
    cannot follow ref_kernel (bytes None when they cannot follow generate_input either). Errors of
    the upstream code itself, and unsupported dtypes, propagate."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    size: int | None = None
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            data = upstream.generate(spec)
            data_spec, data_leaves = describe(data, "generate_input's result")
            size = _checked_bytes(data_leaves)
            result = upstream.reference(data)
            result_spec, result_leaves = describe(result, "ref_kernel's result")
            tolerances, note = read_check(upstream, data, result) if check else (None, "")
    except (Refused, LayoutError):
        raise
    except Exception as error:
        if (
            fake_limit(error) or size is not None
        ):  # a fake-tensor limit, or one of fake modules and upstream code
            return None, size
        raise
    return Probe(spec, upstream.parameters.axes_of(spec), data_spec, data_leaves, result_spec, result_leaves,
                 tolerances=tolerances, check_note=note), size


def _checked_bytes(leaves: list[Leaf]) -> int:
    """The data's bytes; Refused for a dtype SOLboard cannot hold (before anything else runs)."""
    from evaluator.importers.common import check_dtype

    for leaf in leaves:
        if leaf.is_tensor:
            check_dtype(f"generate_input's {'/'.join(leaf.path) or 'tensor'}", str(leaf.dtype))
    return sum(_leaf_bytes(leaf) for leaf in leaves if leaf.is_tensor)


def probe_for_real(upstream: Upstream, spec: Spec, check: bool) -> Probe:
    data = upstream.generate(spec)
    data_spec, data_leaves = describe(data, "generate_input's result")
    result = upstream.reference(data)
    result_spec, result_leaves = describe(result, "ref_kernel's result")
    tolerances, note = read_check(upstream, data, result) if check else (None, "")
    return Probe(spec, upstream.parameters.axes_of(spec), data_spec, data_leaves, result_spec, result_leaves,
                 real=True, tolerances=tolerances, check_note=note)


def describe(value: Any, what: str) -> tuple[str, list[Leaf]]:
    if isinstance(value, tuple) and type(value) is not tuple and not hasattr(value, "_fields"):
        value = tuple(value)  # a torch.return_types structseq (geqrf's (a, tau)): a plain tuple
    try:
        return probe_leaves(value, what)
    except LayoutError as error:
        raise Refused(str(error)) from None


# ---------------------------------------------------------------- check_implementation


@contextmanager
def _recording(modules: list[Any], records: list[tuple[Any, float, float]]) -> Any:
    def allclose(
        received: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-8, *_: Any, **__: Any
    ) -> list:
        records.append((received, float(rtol), float(atol)))
        return []

    def allequal(received: Any, expected: Any, *_: Any, **__: Any) -> list:
        records.append((received, 0.0, 0.0))
        return []

    saved = []
    for module in modules:
        for name, stand_in in zip(SPIED, (allclose, allequal), strict=False):
            if hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, stand_in)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def unknown_tolerance(note: str) -> str:
    """The refusal of a task whose tolerance cannot be read (``note``: why not)."""
    if note == PROPERTY_CHECK:  # says itself when --atol/--rtol may stand in
        return f"tolerance unknown: {note}"
    return f"tolerance unknown: {note}; give one with --atol and --rtol"


def read_check(upstream: Upstream, data: Any, result: Any) -> tuple[list[dict[str, float]] | None, str]:
    """The tolerance of each result leaf that ``check_implementation`` compares, at this spec:
    (one {rtol, atol} per result tensor, how it was read), or (None, why not)."""
    check = getattr(upstream.module, "check_implementation", None)
    if not callable(check):
        return None, "reference.py has no check_implementation"
    records: list[tuple[Any, float, float]] = []
    with _recording(upstream.family, records), torch.no_grad():
        try:
            check(data, result)
        except Exception as error:
            if fake_limit(error):  # values decide: the caller runs it for real
                raise
            return (
                None,
                f"check_implementation does not run on the reference's own result ({type(error).__name__})",
            )
    tensors = [leaf for leaf in flatten(result) if isinstance(leaf, torch.Tensor)]
    if not records:
        return None, PROPERTY_CHECK
    return _per_output(records, tensors)


def _per_output(
    records: list[tuple[Any, float, float]], tensors: list[torch.Tensor]
) -> tuple[list[dict[str, float]] | None, str]:
    """Which recorded comparison covers which result tensor: by identity, else in order when
    there is one comparison per tensor, else one tolerance for all when they agree."""
    found: list[dict[str, float] | None] = [None] * len(tensors)
    for received, rtol, atol in records:
        for index, tensor in enumerate(tensors):
            if received is tensor:
                found[index] = {"rtol": rtol, "atol": atol}
    if all(item is not None for item in found):
        return [item for item in found if item is not None], "check_implementation's comparisons"
    if len(records) == len(tensors):
        return [
            {"rtol": rtol, "atol": atol} for _, rtol, atol in records
        ], "check_implementation's comparisons, in order"
    if len({(rtol, atol) for _, rtol, atol in records}) == 1:
        _, rtol, atol = records[0]
        return [{"rtol": rtol, "atol": atol} for _ in tensors], "check_implementation's comparison"
    return None, f"check_implementation makes {len(records)} comparisons for {len(tensors)} outputs"


# ---------------------------------------------------------------- output buffers


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    left = a.detach().cpu().contiguous().reshape(-1)
    right = b.detach().cpu().contiguous().reshape(-1)
    if left.element_size() != right.element_size() or left.numel() != right.numel():
        return False
    return bool(torch.equal(left.view(torch.uint8), right.view(torch.uint8)))


def perturbed(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype == torch.bool:
        return ~tensor
    if tensor.is_floating_point():
        return (tensor.float() * 2 + 1).to(tensor.dtype)
    return tensor + 1


@dataclass
class Buffers:
    """Result leaf index -> index of the data leaf that is its buffer, and why."""

    pairs: dict[int, int] = field(default_factory=dict)
    why: dict[int, str] = field(default_factory=dict)
    unused: set[int] = field(default_factory=set)


def _sizes_agree(probes: list[Probe], leaf: int, result: int) -> bool:
    """Whether data leaf ``leaf`` and result tensor ``result`` hold the same elements at every
    probed spec (the same shape but for size-1 dimensions): a buffer must, whatever the sizes."""
    for found in probes:
        tensors = [item for item in found.results if item.is_tensor]
        left = [size for size in found.data[leaf].shape or () if size != 1]
        right = [size for size in tensors[result].shape or () if size != 1]
        if left != right:
            return False
    return True


def find_buffers(upstream: Upstream, spec: Spec, data_spec: str, probes: list[Probe]) -> Buffers:
    """Data leaves that are output buffers: one ref_kernel returns, writes, or never reads while
    returning a new tensor of its size at every probed spec. Runs the spec for real (the caller
    checked its size)."""
    data = upstream.generate(spec)
    leaves = flatten(data)
    clean = [item.detach().clone() if isinstance(item, torch.Tensor) else item for item in leaves]
    results = [item for item in flatten(upstream.reference(data)) if isinstance(item, torch.Tensor)]
    tensors = {i: item for i, item in enumerate(leaves) if isinstance(item, torch.Tensor)}
    found = Buffers()
    _returned(found, results, tensors)
    _written(found, results, tensors, clean)
    expected = [item for item in upstream.fresh_reference(data_spec, clean) if isinstance(item, torch.Tensor)]
    for i in tensors:
        if i not in found.pairs.values() and _unused(upstream, data_spec, clean, i, expected):
            found.unused.add(i)
    for j, value in enumerate(results):
        if j in found.pairs:
            continue
        free = [i for i in found.unused if i not in found.pairs.values() and _sizes_agree(probes, i, j)]
        same_shape = sorted((i for i in free if tensors[i].shape == value.shape), reverse=True)
        same_size = sorted((i for i in free if i not in same_shape), reverse=True)
        for i in same_shape + same_size:  # output buffers come last in the data tuples of reference-kernels
            found.pairs[j], found.why[i] = i, "ref_kernel never reads it and it has the size of its result"
            break
    return found


def _returned(found: Buffers, results: list[torch.Tensor], tensors: dict[int, torch.Tensor]) -> None:
    for j, value in enumerate(results):
        for i, item in tensors.items():
            if (
                i not in found.pairs.values()
                and value.untyped_storage().data_ptr() == item.untyped_storage().data_ptr()
            ):
                found.pairs[j], found.why[i] = i, "ref_kernel returns it"
                break


def _written(
    found: Buffers, results: list[torch.Tensor], tensors: dict[int, torch.Tensor], clean: list[Any]
) -> None:
    for i, item in tensors.items():
        if i in found.pairs.values() or same_bytes(item, clean[i]):
            continue
        match = [
            j for j, value in enumerate(results) if j not in found.pairs and value.numel() == item.numel()
        ]
        if not match:
            raise Refused(f"ref_kernel writes into data leaf {i} without returning it")
        found.pairs[match[0]], found.why[i] = i, "ref_kernel writes it"


def _unused(
    upstream: Upstream, data_spec: str, clean: list[Any], index: int, expected: list[torch.Tensor]
) -> bool:
    """Changing data leaf ``index`` changes none of ref_kernel's results."""
    trial = list(clean)
    trial[index] = perturbed(clean[index])
    try:
        changed = [
            item for item in upstream.fresh_reference(data_spec, trial) if isinstance(item, torch.Tensor)
        ]
    except Exception:  # a reference that fails on other values reads the leaf
        return False
    return len(changed) == len(expected) and all(
        same_bytes(a, b) for a, b in zip(changed, expected, strict=False)
    )
