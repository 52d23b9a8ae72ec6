"""Heartbeats: one per slot, every few seconds, from the node supervisor to the ``site`` queue.

The site learns each runner's last contact, GPUs, queues, health and current job from them, and
its sweeper requeues the jobs of a runner whose heartbeats stopped.
"""

from __future__ import annotations

import socket

from runners import jobflow
from runners.slots import Slot, StateDir
from solboard_common.protocol import GpuInfo, Heartbeat

VERSION = "solboard-runner/1"


def build(
    node: str, slot: Slot, state: StateDir, gpus: list[GpuInfo], calibration: dict[str, float]
) -> Heartbeat:
    current = state.read_slot(slot.key)
    healthy, problem = jobflow.read_health(state, slot.key)
    return Heartbeat(
        runner=slot.runner_name(node), node=node, hostname=socket.gethostname(), device=slot.device,  # type: ignore[arg-type]
        queues=[slot.queue], gpus=[gpu for gpu in gpus if gpu.index in slot.gpu_indices],
        current_job=current.get("job_id"), current_evaluation_id=current.get("evaluation_id"),
        calibration=calibration, healthy=healthy, problem=problem, version=VERSION, sent_at=jobflow.now_iso(),
    )
