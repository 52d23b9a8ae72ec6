"""Slots (a GPU set served by one Celery worker) and the node's state folder.

A node with GPUs 0..n-1 of one type has slots ``gpu0`` .. ``gpu<n-1>`` (queue ``gpu.<type>.x1``,
one GPU each) and, when n > 1, ``x<n>`` (queue ``gpu.<type>.x<n>``, all of them). GPU locks keep an
x<n> job from overlapping x1 jobs: every job takes the locks of its GPUs, in index order, while
holding a turnstile, so a waiting x<n> job is not starved by x1 jobs that keep arriving.

The state folder (default ``var/runner/<node>``) holds what the supervisor, the workers and the
control worker share: the job each slot is running, cancel markers, a shutdown marker, the
result outbox and the calibration cache. It is root-only except ``scratch/`` (see sandbox.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from solboard_common.protocol import GpuInfo, gpu_queue


@dataclass(frozen=True)
class Slot:
    key: str
    device: str  # "cuda" or "cpu"
    gpu_type: str
    gpu_indices: tuple[int, ...]
    queue: str

    def runner_name(self, node: str) -> str:
        return f"{node}:{self.key}"

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(index) for index in self.gpu_indices)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Slot:
        data = json.loads(text)
        data["gpu_indices"] = tuple(data["gpu_indices"])
        return cls(**data)


CPU_SLOT = Slot(key="cpu", device="cpu", gpu_type="cpu", gpu_indices=(), queue=gpu_queue("cpu", 1))
#: The CPU development device's multi-GPU slot: the catalogue's multi-GPU problems queue at W = 2,
#: and the CPU device runs them as two gloo processes (docs/multigpu.md). It takes the same lock as
#: the x1 slot (``gpu_set_locks(())`` is ``["cpu"]``), so its jobs and the x1 slot's never overlap.
CPU_MULTI_SLOT = Slot(key="cpux2", device="cpu", gpu_type="cpu", gpu_indices=(), queue=gpu_queue("cpu", 2))


def plan_slots(gpus: list[GpuInfo]) -> list[Slot]:
    """One x1 slot per GPU, plus one x<n> slot per GPU type present n > 1 times; without GPUs, the
    CPU development device's x1 and x2 slots."""
    if not gpus:
        return [CPU_SLOT, CPU_MULTI_SLOT]
    slots = [
        Slot(f"gpu{g.index}", "cuda", g.gpu_type, (g.index,), gpu_queue(_queue_type(g), 1)) for g in gpus
    ]
    by_type: dict[str, list[GpuInfo]] = {}
    for gpu in gpus:
        by_type.setdefault(_queue_type(gpu), []).append(gpu)
    for gpu_type, members in by_type.items():
        if len(members) > 1:
            indices = tuple(g.index for g in members)
            key = f"x{len(members)}" if len(by_type) == 1 else f"{gpu_type}x{len(members)}"
            slots.append(Slot(key, "cuda", gpu_type, indices, gpu_queue(gpu_type, len(members))))
    return slots


def _queue_type(gpu: GpuInfo) -> str:
    # Unknown GPUs ("unknown:<name>") get a queue of their own name, never a known type's queue.
    if gpu.gpu_type.startswith("unknown:"):
        cleaned = "".join(c if c.isalnum() else "_" for c in gpu.gpu_type[8:].lower())
        return f"unknown_{cleaned}".strip("_")
    return gpu.gpu_type


class StateDir:
    def __init__(self, root: Path, scratch: Path | None = None) -> None:
        self.root = root
        self._scratch = scratch
        for name in ("slots", "cancel", "outbox", "locks", "calibration", "artifacts"):
            (root / name).mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)
        for name in ("slots", "cancel", "outbox", "locks", "calibration", "artifacts"):
            os.chmod(root / name, 0o700)

    @property
    def scratch(self) -> Path:
        return self._scratch or self.root / "scratch"

    @property
    def shutdown_marker(self) -> Path:
        return self.root / "shutdown"

    def shutting_down(self) -> bool:
        return self.shutdown_marker.exists()

    # --- what each slot is doing (written by its worker, read by the supervisor and control)

    def slot_file(self, key: str) -> Path:
        return self.root / "slots" / f"{key}.json"

    def write_slot(self, key: str, **state: Any) -> None:
        write_json(self.slot_file(key), {**state, "updated": time.time()})

    def read_slot(self, key: str) -> dict[str, Any]:
        return read_json(self.slot_file(key)) or {}

    # --- cancel markers (control worker -> the worker running that job)

    def cancel_file(self, job_id: str) -> Path:
        return self.root / "cancel" / safe_name(job_id)

    def request_cancel(self, job_id: str, reason: str) -> None:
        write_json(self.cancel_file(job_id), {"reason": reason, "at": time.time()})

    def cancel_reason(self, job_id: str) -> str | None:
        data = read_json(self.cancel_file(job_id))
        return None if data is None else str(data.get("reason", "cancelled"))

    # --- outbox: results not yet handed to the broker

    def outbox_file(self, job_id: str) -> Path:
        return self.root / "outbox" / f"{safe_name(job_id)}.json"

    def outbox(self) -> list[Path]:
        return sorted((self.root / "outbox").glob("*.json"))

    @contextmanager
    def gpu_locks(self, indices: tuple[int, ...]) -> Iterator[None]:
        files = []
        with _flock(self.root / "locks" / "turnstile"):
            for name in lock_names(indices):
                files.append(_open_locked(self.root / "locks" / name))
        try:
            yield
        finally:
            for handle in files:
                handle.close()

    def try_gpu_locks(self, indices: tuple[int, ...]) -> list[Any] | None:
        """The GPU locks without waiting, or None when a job holds one or waits at the turnstile
        for them (it goes first). A warm spare warms up holding them: never while a job on its
        GPUs runs, and a job on them waits for the warm-up to end (close the handles to release)."""
        turnstile = _try_open_locked(self.root / "locks" / "turnstile")
        if turnstile is None:
            return None
        held: list[Any] = []
        try:
            for name in lock_names(indices):
                handle = _try_open_locked(self.root / "locks" / name)
                if handle is None:
                    for other in held:
                        other.close()
                    return None
                held.append(handle)
            return held
        finally:
            turnstile.close()

    # --- warm spares: each slot names its own, so a job on the same GPUs can stop it first

    def spare_file(self, key: str) -> Path:
        return self.root / "slots" / f"{key}.spare.json"

    def write_spare(self, key: str, pgid: int, indices: tuple[int, ...]) -> None:
        write_json(self.spare_file(key), {"pgid": pgid, "locks": lock_names(indices), "at": time.time()})

    def clear_spare(self, key: str) -> None:
        self.spare_file(key).unlink(missing_ok=True)

    def spares(self) -> dict[str, dict[str, Any]]:
        found = {}
        for path in (self.root / "slots").glob("*.spare.json"):
            data = read_json(path)
            if isinstance(data, dict) and isinstance(data.get("pgid"), int):
                found[path.name.removesuffix(".spare.json")] = data
        return found


def lock_names(indices: tuple[int, ...]) -> list[str]:
    """The lock files of a GPU set, in the order every taker takes them (``cpu``: the CPU device)."""
    return [f"gpu{index}" for index in sorted(indices)] or ["cpu"]


def safe_name(job_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)[:200]


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    handle = _open_locked(path)
    try:
        yield
    finally:
        handle.close()


def _open_locked(path: Path) -> Any:
    handle = open(path, "a+")  # noqa: SIM115 - closed by the caller, which holds the lock
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _try_open_locked(path: Path) -> Any | None:
    handle = open(path, "a+")  # noqa: SIM115 - closed by the caller, which holds the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def write_json(path: Path, data: Any) -> None:
    """Atomic: readers see the old file or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
