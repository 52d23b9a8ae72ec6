"""How a node turns its GPUs into slots and queues, and how GPU locks keep an x<n> job from
overlapping x1 jobs on the same GPUs (pure functions and real file locks; no GPU needed)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from runners.identities import claim_block
from runners.slots import CPU_MULTI_SLOT, CPU_SLOT, StateDir, lock_names, plan_slots
from runners.spares import serves_single_gpu_jobs
from solboard_common.protocol import GpuInfo


def gpu(index: int, gpu_type: str = "h200") -> GpuInfo:
    return GpuInfo(index=index, uuid=f"GPU-{index}", name="NVIDIA H200", gpu_type=gpu_type,
                   memory_bytes=141 << 30, driver="580.65")


def test_no_gpu_means_the_cpu_development_device_with_an_x2_slot_on_the_same_lock() -> None:
    assert plan_slots([]) == [CPU_SLOT, CPU_MULTI_SLOT]
    assert CPU_SLOT.queue == "gpu.cpu.x1" and CPU_SLOT.cuda_visible_devices == ""
    assert CPU_MULTI_SLOT.queue == "gpu.cpu.x2" and CPU_MULTI_SLOT.device == "cpu"
    assert lock_names(CPU_SLOT.gpu_indices) == lock_names(CPU_MULTI_SLOT.gpu_indices) == ["cpu"]


def test_only_slots_of_single_gpu_jobs_keep_warm_spares() -> None:
    slots = plan_slots([gpu(0), gpu(1)])
    assert [serves_single_gpu_jobs(slot) for slot in slots] == [True, True, False]
    assert serves_single_gpu_jobs(CPU_SLOT) and not serves_single_gpu_jobs(CPU_MULTI_SLOT)


def test_each_gpu_gets_an_x1_slot_and_all_of_them_an_xn_slot() -> None:
    slots = plan_slots([gpu(0), gpu(1), gpu(2), gpu(3)])
    assert [(s.key, s.queue, s.cuda_visible_devices) for s in slots] == [
        ("gpu0", "gpu.h200.x1", "0"), ("gpu1", "gpu.h200.x1", "1"), ("gpu2", "gpu.h200.x1", "2"),
        ("gpu3", "gpu.h200.x1", "3"), ("x4", "gpu.h200.x4", "0,1,2,3")]


def test_mixed_and_unknown_gpus_never_share_a_known_types_queue() -> None:
    slots = plan_slots([gpu(0, "h100"), gpu(1, "unknown:NVIDIA RTX 6000 Ada")])
    assert [s.queue for s in slots] == ["gpu.h100.x1", "gpu.unknown_nvidia_rtx_6000_ada.x1"]


def test_a_slot_round_trips_through_its_json_form() -> None:
    slot = plan_slots([gpu(0), gpu(1)])[2]
    assert type(slot).from_json(slot.to_json()) == slot


def _hold(root: str, indices: tuple[int, ...], seconds: float, log: str, name: str) -> None:
    state = StateDir(Path(root))
    with state.gpu_locks(indices):
        with open(log, "a") as out:
            out.write(f"{name} start {time.monotonic()}\n")
        time.sleep(seconds)
        with open(log, "a") as out:
            out.write(f"{name} end {time.monotonic()}\n")


def test_an_xn_job_never_overlaps_an_x1_job_on_the_same_gpus(tmp_path: Path) -> None:
    log = tmp_path / "log"
    context = multiprocessing.get_context("spawn")
    x1 = context.Process(target=_hold, args=(str(tmp_path), (1,), 1.0, str(log), "x1"))
    x2 = context.Process(target=_hold, args=(str(tmp_path), (0, 1), 0.2, str(log), "x2"))
    x1.start()
    time.sleep(0.5)
    x2.start()
    for process in (x1, x2):
        process.join(timeout=30)
    events = [line.split()[:2] for line in log.read_text().splitlines()]
    assert events == [["x1", "start"], ["x1", "end"], ["x2", "start"], ["x2", "end"]]


def test_two_slots_on_one_machine_never_share_a_job_uid() -> None:
    (first, lock_a), (second, lock_b) = claim_block(), claim_block()
    try:
        assert not set(first.uids) & set(second.uids)
    finally:
        lock_a.close()
        lock_b.close()

