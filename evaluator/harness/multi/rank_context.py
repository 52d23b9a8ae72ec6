"""What a multi-GPU kernel receives as ``ctx``, and how a rank joins its process group.

``kernel(ctx, *inputs, *outputs)``: ``ctx`` is a ``RankContext`` (rank, world size, the process
group, the device). The ranks of one job form the group among themselves, from a ``FileStore`` in
the job's scratch folder: no port to pick or to race for, nothing outside the job's folder, and it
works inside the runner's network namespace (gloo and NCCL's bootstrap then talk over loopback).
The store is the untrusted children's own: the judge never reads it (docs/multigpu.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

import torch

from evaluator.vocabulary import CUDA

Backend = Literal["gloo", "nccl"]
#: Longest a collective may wait for a peer before torch gives up on its own. The judge's stage
#: limits (and its watchdogs) end a hang long before; this only keeps a rank from waiting forever
#: should the judge be gone.
GROUP_TIMEOUT = dt.timedelta(minutes=30)


@dataclass(frozen=True)
class RankContext:
    """One rank's view of a multi-GPU call (frozen: a kernel cannot retarget the harness's group)."""

    rank: int
    world_size: int
    group: Any  # torch.distributed.ProcessGroup of every rank of this job
    device: torch.device
    backend: Backend


def backend_for(device: str) -> Backend:
    """NCCL between GPUs; gloo on the CPU development device (the same harness, two processes in CI)."""
    return "nccl" if device == CUDA else "gloo"


def rank_device(device: str, rank: int) -> torch.device:
    """Rank r drives GPU r of those the job may see (CUDA_VISIBLE_DEVICES lists the slot's GPUs)."""
    return torch.device("cuda", rank) if device == CUDA else torch.device("cpu")


def join_group(device: str, store_path: str, rank: int, world_size: int) -> RankContext:
    """Join the job's process group; on a GPU, bind this process to its GPU first.

    NCCL: ``device_id`` makes the communicator initialise now (eagerly), while only harness code
    runs, so the multicast-off environment the harness set is the one NCCL reads (docs/multigpu.md)."""
    import torch.distributed as dist

    backend = backend_for(device)
    where = rank_device(device, rank)
    store = dist.FileStore(store_path, world_size)
    options: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(where)
        options["device_id"] = where
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=GROUP_TIMEOUT,
                            **options)
    return RankContext(rank, world_size, dist.group.WORLD, where, backend)
