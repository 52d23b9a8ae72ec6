"""The child's framing checks: they can only reject the child (the judge decides every verdict in
the submission's favour; docs/security.md). The submission shares the child with this code.

- ``Integrity``: identities of every callable a cheat would patch (the timer, torch.cuda.Event and
  synchronize, comparison functions, torch.Tensor's methods, the statistics and JSON helpers, the
  harness's own functions and their code objects, builtins), captured BEFORE the submission is
  imported and verified after every stage (class 4).
- ``Activity``: Python threads, native threads and child processes, checked after calls (class 2).
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_FunctionTypes = (types.FunctionType,)
#: Attributes of plain modules that legitimately change while running (not callables).
_MUTABLE_OK = {"modules", "path", "argv", "last_value", "last_type", "last_traceback", "last_exc"}


def _entry(value: Any) -> tuple[Any, ...]:
    """What must stay identical: the object, and for Python functions their code and defaults."""
    if isinstance(value, _FunctionTypes):
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__)
    if isinstance(value, (classmethod, staticmethod)):
        return (value, *_entry(value.__func__)[1:])
    if isinstance(value, property):
        return (value, value.fget, value.fset)
    return (value,)


def _is_watched(value: Any) -> bool:
    return callable(value) or isinstance(value, (classmethod, staticmethod, property, types.ModuleType))


@dataclass
class Integrity:
    """Snapshot of namespaces (modules and classes) whose callables must not change."""

    entries: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    closed: dict[str, frozenset[str]] = field(default_factory=dict)  # classes: no new attributes

    def watch_namespace(self, label: str, namespace: Any, closed: bool = False) -> None:
        items = dict(vars(namespace))
        for name, value in items.items():
            if _is_watched(value) and name not in _MUTABLE_OK:
                self.entries[(label, name)] = _entry(value)
        if closed:
            self.closed[label] = frozenset(items)
        self._namespaces[label] = namespace

    def watch_module_and_classes(self, module: types.ModuleType) -> None:
        """A module's callables, plus the dicts of the classes it defines (closed to additions)."""
        label = module.__name__
        self.watch_namespace(label, module)
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and getattr(value, "__module__", None) == label:
                self.watch_namespace(f"{label}.{name}", value, closed=True)

    def __post_init__(self) -> None:
        self._namespaces: dict[str, Any] = {}

    def changed(self) -> list[str]:
        """Names whose object, code or defaults differ from the snapshot, or that were added."""
        problems = []
        for (label, name), expected in self.entries.items():
            namespace = self._namespaces[label]
            current = vars(namespace).get(name, _MISSING)
            if current is _MISSING or not _same(_entry(current), expected):
                problems.append(f"{label}.{name}")
        for label, names in self.closed.items():
            added = set(vars(self._namespaces[label])) - names
            problems.extend(f"{label}.{name} (added)" for name in sorted(added))
        return problems


_MISSING = object()


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def standard_integrity(extra_modules: list[types.ModuleType]) -> Integrity:
    """Everything the harness relies on; call after torch and the harness are imported."""
    import gc
    import hashlib
    import hmac
    import json
    import math
    import time

    import torch

    snapshot = Integrity()
    for module in (builtins, time, os, json, hmac, hashlib, math, gc, threading, signal):
        snapshot.watch_namespace(module.__name__, module)
    snapshot.watch_namespace("sys", sys)
    snapshot.watch_namespace("torch", torch)
    snapshot.watch_namespace("torch.Tensor", torch.Tensor, closed=True)
    snapshot.watch_namespace("torch.cuda", torch.cuda)
    snapshot.watch_namespace("torch.cuda.Event", torch.cuda.Event, closed=True)
    snapshot.watch_namespace("torch.cuda.Stream", torch.cuda.Stream, closed=True)
    for name in ("torch.profiler", "torch.autograd.profiler", "torch.testing", "torch.cuda.streams"):
        loaded = sys.modules.get(name)
        if loaded is not None:
            snapshot.watch_module_and_classes(loaded)
    for module in extra_modules:
        snapshot.watch_module_and_classes(module)
    return snapshot


def install_what_torch_compile_installs() -> None:
    """Make now, before the integrity snapshot, the changes torch.compile's own import makes to the
    watched namespaces, so an honest ``torch.compile`` submission is not "patched during import".

    Importing ``torch._dynamo`` replaces ``torch.manual_seed`` with a wrapper that keeps dynamo from
    tracing it, unless it finds that wrapper already there. The same wrapper is made here, the way
    dynamo makes it (importing dynamo itself would cost every job ~0.7 s): dynamo then leaves it
    alone, and a submission that replaces ``torch.manual_seed`` itself is still caught. A torch
    whose dynamo patches something else fails ``tests/evaluator/test_torch_compile.py``, not
    silently. tqdm's monitor thread (Inductor shows progress bars while it autotunes) is switched
    off at its source rather than excused by its name: a thread a submission names
    ``tqdm_monitor`` is still a background thread (class 2)."""
    import torch

    if torch.manual_seed is torch.random.manual_seed:
        torch.manual_seed = torch._disable_dynamo(torch.manual_seed)  # type: ignore[attr-defined]
        torch.jit._builtins._register_builtin(torch.manual_seed, "aten::manual_seed")  # type: ignore[attr-defined]
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def harness_modules() -> list[types.ModuleType]:
    """The evaluator's own modules that are loaded in this process (problems included)."""
    return [
        module
        for name, module in sorted(sys.modules.items())
        if isinstance(module, types.ModuleType)
        and name.startswith("evaluator")
        and name != "evaluator.ptx.user"
    ]


# ---------------------------------------------------------------- threads and processes


def python_thread_count() -> int:
    """Threads that have run Python code, including ones started with _thread directly."""
    return len(sys._current_frames())


def native_threads() -> dict[int, str]:
    """tid -> name of every thread of this process (Linux /proc)."""
    threads: dict[int, str] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as handle:
                threads[int(tid)] = handle.read().strip()
        except OSError:
            continue
    return threads


def child_processes() -> list[int]:
    pids: list[int] = []
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/children") as handle:
                pids.extend(int(pid) for pid in handle.read().split())
        except OSError:
            continue
    return pids


#: Native threads the CUDA driver and runtime start on demand (event handler, stream callbacks).
_DRIVER_THREAD_PREFIXES = ("cuda",)


@dataclass
class Activity:
    """Threads and processes present at a reference point (before import, after warm-up)."""

    tids: frozenset[int]
    python_threads: int

    @classmethod
    def now(cls) -> Activity:
        return cls(frozenset(native_threads()), python_thread_count())

    def new_threads(self) -> dict[int, str]:
        """Threads not present at the reference point (driver threads aside), by name."""
        try:
            current = {int(tid) for tid in os.listdir("/proc/self/task")}
        except OSError:
            return {}
        if current <= self.tids:  # the cheap, common case: read no names
            return {}
        names = native_threads()
        return {
            tid: names.get(tid, "?")
            for tid in current - self.tids
            if tid in names and not names[tid].startswith(_DRIVER_THREAD_PREFIXES)
        }

    def problems(self, native: bool = True, children: bool = True) -> str | None:
        """Why the process is not as quiet as at the reference point, or None."""
        if python_thread_count() > self.python_threads:
            names = sorted(thread.name for thread in threading.enumerate())
            return f"a background thread is running (class 2): threads {names}"
        if native:
            extra = self.new_threads()
            if extra:
                return (
                    "native threads started by the submission are running (class 2): "
                    f"{sorted(extra.values())}"
                )
        if not children:
            return None
        children_pids = child_processes()
        if children_pids:
            return f"the submission left child processes running (class 2): pids {children_pids}"
        return None


# ---------------------------------------------------------------- torch global state

#: Global numerics/performance switches a submission may flip: the reference and the baseline run
#: under the values captured before the import (a submission must not loosen the reference, e.g.
#: with TF32, nor slow the baseline down); the submission's own calls keep its values.
_SWITCHES = (
    ("torch.backends.cuda.matmul", "allow_tf32"),
    ("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    ("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
    ("torch.backends.cudnn", "allow_tf32"),
    ("torch.backends.cudnn", "benchmark"),
    ("torch.backends.cudnn", "deterministic"),
    ("torch.backends.cudnn", "enabled"),
)


def _owner(path: str) -> Any:
    import torch

    owner: Any = torch
    for part in path.split(".")[1:]:
        owner = getattr(owner, part)
    return owner


@dataclass(frozen=True)
class TorchState:
    switches: tuple[tuple[str, str, Any], ...]
    matmul_precision: str
    grad_enabled: bool
    default_dtype: Any

    @classmethod
    def capture(cls) -> TorchState:
        import torch

        switches = tuple(
            (path, name, getattr(_owner(path), name))
            for path, name in _SWITCHES
            if hasattr(_owner(path), name)
        )
        return cls(
            switches, torch.get_float32_matmul_precision(), torch.is_grad_enabled(), torch.get_default_dtype()
        )

    def apply(self) -> None:
        import torch

        for path, name, value in self.switches:
            setattr(_owner(path), name, value)
        torch.set_float32_matmul_precision(self.matmul_precision)
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_default_dtype(self.default_dtype)


@contextmanager
def trusted_torch_state(trusted: TorchState | None) -> Iterator[None]:
    """Run the enclosed trusted code under ``trusted``; restore the submission's values after."""
    if trusted is None:
        yield
        return
    current = TorchState.capture()
    trusted.apply()
    try:
        yield
    finally:
        current.apply()
