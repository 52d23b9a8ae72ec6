"""Speed of light, scores and GPU facts: hand-computed numbers, edge cases, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.gpu_specs import (
    GpuSpecError,
    estimated_spec,
    get_gpu_spec,
    gpu_type_for_name,
    load_gpu_specs,
    with_ceilings,
)
from evaluator.problems import FLOP_CLASSES, Counts, get_problem
from evaluator.scoring import SCORE_FLOOR, problem_score, shape_score, sol_figures
from evaluator.sol import t_sol, t_sol_attainable

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- shape score


def test_a_kernel_as_fast_as_the_baseline_scores_one_half() -> None:
    assert shape_score(t_k=200e-6, t_b=200e-6, t_sol_s=100e-6) == pytest.approx(0.5)


def test_a_kernel_at_the_speed_of_light_scores_one() -> None:
    assert shape_score(t_k=100e-6, t_b=200e-6, t_sol_s=100e-6) == 1.0


def test_a_kernel_halfway_between_baseline_and_light_scores_two_thirds() -> None:
    # S = 1 / (1 + 50/100)
    assert shape_score(t_k=150e-6, t_b=200e-6, t_sol_s=100e-6) == pytest.approx(2 / 3)


def test_a_kernel_slower_than_the_baseline_scores_below_one_half() -> None:
    # S = 1 / (1 + 300/100) = 0.25
    assert shape_score(t_k=400e-6, t_b=200e-6, t_sol_s=100e-6) == pytest.approx(0.25)


def test_a_baseline_at_the_speed_of_light_leaves_only_one_or_zero() -> None:
    assert shape_score(t_k=100e-6, t_b=100e-6, t_sol_s=100e-6) == 1.0
    assert shape_score(t_k=101e-6, t_b=100e-6, t_sol_s=100e-6) == 0.0
    assert shape_score(t_k=90e-6, t_b=80e-6, t_sol_s=100e-6) == 1.0


def test_a_faster_than_light_kernel_is_capped_at_one() -> None:
    assert shape_score(t_k=50e-6, t_b=200e-6, t_sol_s=100e-6) == 1.0


@pytest.mark.parametrize("t_k, t_b, t_sol_s", [(0, 1, 0.5), (1, 0, 0.5), (1, 1, -1), (math.nan, 1, 0.5)])
def test_shape_score_refuses_impossible_times(t_k: float, t_b: float, t_sol_s: float) -> None:
    with pytest.raises(ValueError):
        shape_score(t_k, t_b, t_sol_s)


# ---------------------------------------------------------------- problem score


def test_problem_score_is_the_geometric_mean() -> None:
    assert problem_score([1.0, 0.25]) == pytest.approx(0.5)
    assert problem_score([0.5, 0.5, 0.5]) == pytest.approx(0.5)


def test_one_zero_shape_cannot_collapse_the_problem_score_to_zero_or_nan() -> None:
    score = problem_score([0.0, 1.0])
    assert score == pytest.approx(math.sqrt(SCORE_FLOOR))
    assert problem_score([1e-300, 1.0]) == pytest.approx(math.sqrt(SCORE_FLOOR))
    assert math.isfinite(problem_score([1e-300] * 1000))


def test_problem_score_refuses_nan_and_empty_lists() -> None:
    with pytest.raises(ValueError):
        problem_score([])
    with pytest.raises(ValueError):
        problem_score([0.5, math.nan])


# ---------------------------------------------------------------- t_SOL


def test_a_square_bf16_gemm_on_h200_is_compute_bound_at_989_tflops() -> None:
    counts = get_problem("gemm_bf16").counts({"M": 4096, "N": 4096, "K": 4096})
    bound = t_sol(counts, get_gpu_spec("h200"))
    assert bound.bound == "compute"
    assert bound.t_sol_us == pytest.approx(2 * 4096**3 / 989e12 * 1e6)  # 138.968 us
    assert bound.t_sol_us == pytest.approx(138.968, abs=1e-3)


def test_a_gemv_on_h200_is_memory_bound_at_4_8_tbps() -> None:
    counts = get_problem("gemm_bf16").counts({"M": 1, "N": 7168, "K": 5120})
    bound = t_sol(counts, get_gpu_spec("h200"))
    assert bound.bound == "memory"
    assert bound.t_sol_us == pytest.approx((5120 + 7168 * 5120 + 7168) * 2 / 4.8e12 * 1e6)


def test_a_vector_add_of_2_24_floats_takes_41_9_us_on_h200_and_25_2_us_on_b200() -> None:
    counts = get_problem("vector_add").counts({"N": 2**24})
    assert t_sol(counts, get_gpu_spec("h200")).t_sol_us == pytest.approx(12 * 2**24 / 4.8e12 * 1e6)
    assert t_sol(counts, get_gpu_spec("h200")).t_sol_us == pytest.approx(41.943, abs=1e-3)
    assert t_sol(counts, get_gpu_spec("b200")).t_sol_us == pytest.approx(25.166, abs=1e-3)


def test_comm_bytes_make_a_link_bound_at_the_per_direction_peak() -> None:
    bound = t_sol(Counts(flops={}, bytes=1e6, comm_bytes=450e6), get_gpu_spec("h200"))
    assert bound.bound == "link"
    assert bound.t_sol_s == pytest.approx(1e-3)


def test_tensor_classes_add_up_but_simt_may_overlap_them() -> None:
    spec = get_gpu_spec("h100")
    tensor_only = Counts(flops={"bf16_tensor": 989e12, "fp8_tensor": 1979e12}, bytes=0)
    assert t_sol(tensor_only, spec).t_compute_s == pytest.approx(2.0)
    with_simt = Counts(flops={"bf16_tensor": 989e12, "fp32_simt": 67e12 / 2}, bytes=0)
    assert t_sol(with_simt, spec).t_compute_s == pytest.approx(1.0)


def test_world_size_splits_flops_and_bytes_but_not_comm_bytes() -> None:
    counts = Counts(flops={"bf16_tensor": 2 * 989e12}, bytes=0, comm_bytes=0)
    assert t_sol(counts, get_gpu_spec("h200"), world_size=2).t_sol_s == pytest.approx(1.0)


def test_calibrated_ceilings_give_a_longer_attainable_bound() -> None:
    counts = get_problem("gemm_bf16").counts({"M": 8192, "N": 8192, "K": 8192})
    spec = get_gpu_spec("h200")
    attainable = t_sol_attainable(counts, spec, {"bf16_tensor_tflops": 700.0, "hbm_tbps": 4.2})
    assert attainable.t_sol_s == pytest.approx(2 * 8192**3 / 700e12)
    with pytest.raises(GpuSpecError):
        with_ceilings(spec, {"bf16_tflops": 700.0})


def test_a_gpu_without_a_needed_peak_has_no_speed_of_light() -> None:
    with pytest.raises(GpuSpecError):
        t_sol(Counts(flops={"bf16_tensor": 1.0}, bytes=1.0), get_gpu_spec("cpu"))


# ---------------------------------------------------------------- SOL figures


def test_sol_figures_of_a_baseline_speed_kernel() -> None:
    counts = get_problem("gemm_bf16").counts({"M": 4096, "N": 4096, "K": 4096})
    figures = sol_figures(counts, get_gpu_spec("h200"), t_kernel_s=200e-6, t_baseline_s=200e-6)
    assert figures.score == pytest.approx(0.5)
    assert figures.speedup == pytest.approx(1.0)
    assert figures.sol_fraction == pytest.approx(138.968e-6 / 200e-6, rel=1e-5)
    assert figures.tflops == pytest.approx(2 * 4096**3 / 200e-6 / 1e12)
    assert figures.gbps == pytest.approx(3 * 4096**2 * 2 / 200e-6 / 1e9)
    assert not figures.faster_than_light
    assert figures.t_sol_attainable_us is None


def test_a_kernel_faster_than_light_is_flagged() -> None:
    counts = get_problem("vector_add").counts({"N": 2**24})
    figures = sol_figures(counts, get_gpu_spec("h200"), 30e-6, 60e-6, calibration={"hbm_tbps": 4.2})
    assert figures.faster_than_light
    assert figures.sol_fraction > 1
    assert figures.t_sol_attainable_us == pytest.approx(12 * 2**24 / 4.2e12 * 1e6)


# ---------------------------------------------------------------- gpus.toml


def test_gpus_toml_has_the_datasheet_rows() -> None:
    specs = load_gpu_specs()
    assert {"h100", "h200", "b200", "cpu"} <= set(specs)
    for key in ("h100", "h200", "b200"):
        assert set(specs[key].peaks_tflops) == set(FLOP_CLASSES), key
        assert specs[key].peaks_tflops["fp16_tensor"] == specs[key].peaks_tflops["bf16_tensor"]
    assert specs["h200"].peaks_tflops["bf16_tensor"] == 989
    assert specs["h200"].hbm_tbps == 4.8
    assert specs["h100"].hbm_tbps == 3.35
    assert specs["b200"].nvlink_gbps_per_direction == 900
    assert specs["b200"].verified_on_hardware is False
    assert specs["cpu"].development_device and not specs["cpu"].peaks_tflops


def test_nvml_names_map_to_gpu_types_exactly() -> None:
    assert gpu_type_for_name("NVIDIA H200") == "h200"
    assert gpu_type_for_name("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_type_for_name(" nvidia b200 ") == "b200"
    assert gpu_type_for_name("NVIDIA H200 NVL") == "unknown:NVIDIA H200 NVL"


def test_an_unknown_gpu_gets_an_estimated_row_from_nvml_facts() -> None:
    spec = estimated_spec("NVIDIA H200 NVL", 132, 1980, 6144, 3201)
    assert spec.estimated
    assert spec.key == "unknown:NVIDIA H200 NVL"
    assert spec.peaks_tflops["fp32_simt"] == pytest.approx(128 * 2 * 132 * 1.98e9 / 1e12)  # 66.9
    assert spec.peaks_tflops["bf16_tensor"] == pytest.approx(16 * spec.peaks_tflops["fp32_simt"])
    assert spec.hbm_tbps == pytest.approx(6144 / 8 * 3201e6 * 2 / 1e12)  # 4.92
    assert spec.nvlink_gbps_per_direction is None


# ---------------------------------------------------------------- command line


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evaluator", *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_problems_and_sol_commands_never_import_torch() -> None:
    code = (
        "import sys; from evaluator.cli import main;"
        "main(['problems']); main(['sol', 'gemm_bf16', '--gpu', 'h100']);"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_problems_json_lists_every_problem_with_its_shape_flags() -> None:
    result = _cli("problems", "--json")
    assert result.returncode == 0, result.stderr
    problems = {item["name"]: item for item in json.loads(result.stdout)}
    assert {"vector_add", "gemm_bf16"} <= set(problems)
    shapes = problems["gemm_bf16"]["shapes"]
    assert any(shape["cpu"] and not shape["ranked"] for shape in shapes)
    assert {"shape_id", "axes", "ranked", "quick", "cpu"} <= set(shapes[0])


def test_sol_json_gives_t_sol_in_microseconds_per_shape() -> None:
    result = _cli("sol", "gemm_bf16", "--gpu", "h200", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["shape_id"]: row for row in json.loads(result.stdout)["shapes"]}
    assert rows["m4096_n4096_k4096"]["t_sol_us"] == pytest.approx(138.968, abs=1e-3)
    assert rows["m4096_n4096_k4096"]["bound"] == "compute"
    assert rows["m1_n7168_k5120"]["bound"] == "memory"


def test_sol_refuses_a_world_size_for_a_single_gpu_problem() -> None:
    result = _cli("sol", "vector_add", "--gpu", "h200", "--world-size", "2")
    assert result.returncode == 2
    assert "single-GPU" in result.stderr
