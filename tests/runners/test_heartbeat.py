"""A slot's heartbeat says what the site needs of it: its runner name and queue, its own GPUs, the
job it is running, and whether it can take another (and why not)."""

from __future__ import annotations

from pathlib import Path

from runners import heartbeat, jobflow
from runners.slots import CPU_SLOT, Slot, StateDir, write_json
from solboard_common.protocol import GpuInfo, Heartbeat, gpu_queue


def gpu(index: int) -> GpuInfo:
    return GpuInfo(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H200",
        gpu_type="h200",
        memory_bytes=141 << 30,
        driver="580.1",
    )


PAIR = Slot(key="gpu2-3", device="cuda", gpu_type="h200", gpu_indices=(2, 3), queue=gpu_queue("h200", 2))


def test_a_slots_heartbeat_names_its_runner_queue_and_only_its_own_gpus(tmp_path: Path) -> None:
    beat = heartbeat.build("node-a", PAIR, StateDir(tmp_path), [gpu(index) for index in range(4)],
                           {"ceilings.hbm_tbps": 4.2})
    assert beat.runner == "node-a:gpu2-3" and beat.node == "node-a" and beat.queues == ["gpu.h200.x2"]
    assert [info.index for info in beat.gpus] == [2, 3]
    assert beat.device == "cuda" and beat.calibration == {"ceilings.hbm_tbps": 4.2}
    assert beat.healthy and beat.problem == "" and beat.current_job is None
    assert beat.version == heartbeat.VERSION and beat.sent_at.endswith("+00:00")


def test_the_heartbeat_carries_the_job_the_slot_is_running(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.write_slot(CPU_SLOT.key, job_id="job-7", evaluation_id=41)
    beat = heartbeat.build("node-a", CPU_SLOT, state, [gpu(0)], {})
    assert (beat.current_job, beat.current_evaluation_id) == ("job-7", 41)
    assert beat.device == "cpu" and beat.gpus == []  # the CPU slot owns no GPU


def test_an_unhealthy_slot_says_why_and_the_message_survives_the_wire(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    write_json(jobflow.health_file(state, PAIR.key),
                       {"healthy": False, "problem": "GPU 2 still held by a process of the last job"})
    beat = heartbeat.build("node-a", PAIR, state, [gpu(2), gpu(3)], {})
    assert not beat.healthy and "still held" in beat.problem
    assert Heartbeat.model_validate_json(beat.model_dump_json()) == beat
