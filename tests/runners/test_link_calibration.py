"""An x<n> slot's calibration: the single-GPU ceilings with the link's all-reduce bus bandwidth.

The measurement is the real ``python -m evaluator calibrate --world-size 2`` in a subprocess, on
the CPU device (gloo: the figure means nothing, the path is the GPU one's); on two H200s the same
measurement read 331 GB/s (benchmarks/results/multigpu.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluator.gpu_specs import get_gpu_spec, with_ceilings
from runners import calibration
from runners.node import Node, NodeConfig
from runners.slots import plan_slots
from solboard_common.protocol import GpuInfo


def test_an_x2_slot_gets_the_single_gpu_ceilings_and_the_measured_link(tmp_path: Path) -> None:
    single = tmp_path / "h200-driver-580.json"
    single.write_text(
        json.dumps({"device": "NVIDIA H200", "ceilings": {"bf16_tensor_tflops": 790.0, "hbm_tbps": 4.2}})
    )
    path = calibration.calibrate_link(tmp_path, "h200", "580", (0, 1), single, device="cpu")
    assert path is not None and path.name == "h200-x2-driver-580.json"
    data = json.loads(path.read_text())
    ceilings = data["ceilings"]
    assert ceilings["bf16_tensor_tflops"] == 790.0 and ceilings["hbm_tbps"] == 4.2
    assert ceilings["nvlink_gbps_per_direction"] == data["link"]["best_busbw_gbps"] > 0
    assert data["link"]["world_size"] == 2 and len(data["link"]["rows"]) == 2
    # What a job's --calibration does with it: the link figure replaces the datasheet's.
    spec = with_ceilings(get_gpu_spec("h200"), ceilings)
    assert spec.nvlink_gbps_per_direction == ceilings["nvlink_gbps_per_direction"]
    assert calibration.load(path)["link.best_busbw_gbps"] == ceilings["nvlink_gbps_per_direction"]


def test_the_link_is_measured_once_per_type_count_and_driver(tmp_path: Path, monkeypatch: Any) -> None:
    runs: list[list[str]] = []

    def measured(extra: list[str], indices: tuple[int, ...], what: str) -> dict[str, Any]:
        runs.append(extra)
        return {"ceilings": {"nvlink_gbps_per_direction": 331.4}, "link": {"best_busbw_gbps": 331.4}}

    monkeypatch.setattr(calibration, "_run_calibrate", measured)
    first = calibration.calibrate_link(tmp_path, "h200", "580", (0, 1), None)
    again = calibration.calibrate_link(tmp_path, "h200", "580", (0, 1), None)
    other_driver = calibration.calibrate_link(tmp_path, "h200", "590", (0, 1), None)
    assert first == again != other_driver and len(runs) == 2
    assert runs[0] == ["--world-size", "2", "--device", "cuda"]


def test_a_failed_link_measurement_leaves_the_slot_the_single_gpu_file(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(calibration, "_run_calibrate", lambda extra, indices, what: None)
    assert calibration.calibrate_link(tmp_path, "h200", "580", (0, 1), None) is None


def test_the_node_hands_each_slot_its_own_calibration(tmp_path: Path, monkeypatch: Any) -> None:
    gpus = [GpuInfo(index=i, uuid=f"GPU-{i}", name="NVIDIA H200", gpu_type="h200", memory_bytes=141 << 30,
                    driver="580") for i in range(2)]
    monkeypatch.setattr(
        calibration, "calibrate", lambda folder, gpu_type, driver, index: tmp_path / "single.json"
    )
    monkeypatch.setattr(calibration, "calibrate_link",
                        lambda folder, gpu_type, driver, indices, single: tmp_path / f"x{len(indices)}.json")
    node = Node.__new__(Node)
    node.config = NodeConfig.__new__(NodeConfig)
    node.gpus, node.slots = gpus, plan_slots(gpus)
    node.state = type("State", (), {"root": tmp_path})()
    node.calibrations = node._calibrate()
    by_slot = {slot.key: node.calibration_of(slot) for slot in node.slots}
    assert by_slot == {
        "gpu0": tmp_path / "single.json",
        "gpu1": tmp_path / "single.json",
        "x2": tmp_path / "x2.json",
    }
