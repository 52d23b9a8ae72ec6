"""The harness on a real GPU: timing method, scores, and the GPU-only cheating classes.

Skipped without CUDA; run on the H200 with ``pytest -m gpu tests/evaluator/test_harness_gpu.py``.
"""

from __future__ import annotations

import pytest

from tests.harness_helpers import CHEATS, GOOD, cuda_available, evaluate_file

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU"),
]
QUICK = ("--device", "cuda", "--shapes", "quick", "--no-profile")


def test_the_baseline_as_a_submission_scores_about_one_half() -> None:
    report = evaluate_file("vector_add", GOOD / "baseline.py", *QUICK, "--mode", "ranked")
    assert report["status"] == "PASSED"
    shape = report["shapes"][0]
    assert shape["timing"]["method"] == "cupti"
    assert shape["timing"]["ranked_source"] == "device_span"
    assert 0.4 < shape["sol"]["score"] < 0.6
    assert shape["telemetry_before"]["sm_clock_mhz"] > 0


def test_the_gemm_baseline_scores_about_one_half_on_every_quick_shape() -> None:
    report = evaluate_file("gemm_bf16", GOOD / "gemm_baseline.py", *QUICK, "--mode", "ranked")
    assert report["status"] == "PASSED"
    for shape in report["shapes"]:
        assert 0.4 < shape["sol"]["score"] < 0.6, shape["shape_id"]


def test_a_slower_submission_scores_lower_than_the_baseline() -> None:
    slow = evaluate_file("vector_add", GOOD / "slower.py", *QUICK, "--mode", "ranked")
    assert slow["status"] == "PASSED"
    assert slow["shapes"][0]["sol"]["score"] < 0.45


def test_it_rejects_work_left_on_a_side_stream() -> None:
    report = evaluate_file("vector_add", CHEATS / "c01_side_stream.py", *QUICK)
    assert report["status"] == "REJECTED"
    assert "class 1" in report["shapes"][0]["message"]


def test_it_rejects_a_persisting_l2_window() -> None:
    report = evaluate_file("vector_add", CHEATS / "c11_persisting_l2.py", *QUICK)
    assert report["status"] == "REJECTED"
    assert "class 11" in report["shapes"][0]["message"]


def test_it_rejects_a_native_thread_that_python_cannot_see() -> None:
    # Only the GPU timing loop checks native threads after each call (torch's CPU ops start their
    # own pool, so the development device checks Python threads only).
    report = evaluate_file("vector_add", CHEATS / "c02_native_thread.py", *QUICK)
    assert report["status"] == "REJECTED"
    assert any("native threads started by the submission are running (class 2)" in shape["message"]
               for shape in report["shapes"])


def test_host_work_before_the_first_kernel_is_ranked_by_events_and_flagged() -> None:
    report = evaluate_file("vector_add", CHEATS / "c14_host_work.py", *QUICK, "--mode", "ranked")
    timing = report["shapes"][0]["timing"]
    assert timing["ranked_source"] == "events"
    # 2 ms of host work; the launch gate (at most GATE_MAX_US, sized from this call's own host
    # time) covers part of it, the rest is in the ranked event time (1077 us on the H200).
    from evaluator.harness.timing.gpu_loop import GATE_MAX_US

    assert timing["median_us"] > 2000 - GATE_MAX_US - 100
    assert timing["gate_us"] <= GATE_MAX_US
    # A flag on a ranked shape, a note on an unranked one (it never costs the ranking there).
    assert any("class 14" in remark for remark in report["flags"] + report["notes"])
    assert not report["rank_eligible"]


@pytest.mark.parametrize("name", ["c09_less_work_when_timed", "c13_uninitialised"])
def test_cpu_runnable_cheats_are_caught_on_the_gpu_too(name: str) -> None:
    report = evaluate_file(
        "vector_add", CHEATS / f"{name}.py", *QUICK, "--mode", "ranked", "--secret-seed-stdin", stdin="99\n"
    )
    assert report["status"] in ("REJECTED", "INCORRECT_NUMERICAL")


def test_calibrate_measures_plausible_ceilings() -> None:
    import json

    from tests.harness_helpers import run_cli

    result = run_cli("calibrate", "--json", "--runs", "5")
    assert result.returncode == 0, result.stderr
    ceilings = json.loads(result.stdout)["ceilings"]
    assert 300 < ceilings["bf16_tensor_tflops"] < 1000
    assert 2.0 < ceilings["hbm_tbps"] < 5.0


def test_an_illegal_address_is_a_runtime_error_and_stops_the_evaluation() -> None:
    report = evaluate_file("vector_add", GOOD / "cuda_fault.py", "--device", "cuda", "--no-profile")
    assert report["status"] == "RUNTIME_ERROR"
    first, *rest = report["shapes"]
    assert first["status"] == "RUNTIME_ERROR"
    assert all(shape["status"] == "RUNTIME_ERROR" and "not run" in shape["message"] for shape in rest)


def _needs_ncu() -> None:
    import shutil

    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on the PATH")


def test_the_one_pass_witness_confirms_and_gives_launch_facts() -> None:
    _needs_ncu()
    report = evaluate_file("vector_add", GOOD / "baseline.py", "--device", "cuda", "--shapes", "quick",
                           "--mode", "ranked")
    assert report["status"] == "PASSED", report["message"]
    assert report["witnessed"]
    shape = report["shapes"][0]
    assert shape["witness"]["confirmed"], shape["witness"]
    kernel = shape["profile"]["kernels"][0]
    assert 1 < kernel["duration_us"] < 100 and kernel["registers_per_thread"]


def test_ranked_mode_is_witnessed_by_nsight_compute_which_also_gives_the_profile() -> None:
    _needs_ncu()
    report = evaluate_file("vector_add", GOOD / "baseline.py", "--device", "cuda", "--shapes", "quick",
                           "--mode", "ranked", "--profile-sections")
    assert report["status"] == "PASSED", report["message"]
    assert report["witnessed"]
    for shape in report["shapes"]:
        witness = shape["witness"]
        assert witness["source"] == "ncu" and witness["confirmed"], witness
        assert shape["timing"]["median_us"] >= witness["floor_us"]
    profile = report["shapes"][0]["profile"]
    assert profile["available"], profile["reason"]
    kernel = profile["kernels"][0]
    assert 1 < kernel["duration_us"] < 100
    assert kernel["top_stalls"]


def test_timings_forged_inside_the_child_are_not_confirmed_by_the_witness() -> None:
    _needs_ncu()
    report = evaluate_file("vector_add", CHEATS / "c16_forge_near_light.py", "--device", "cuda", "--shapes",
                           "ranked", "--mode", "ranked", "--secret-seed-stdin", stdin="7\n")
    assert report["status"] == "REJECTED"
    assert "timing not confirmed" in report["message"]
    assert not report["rank_eligible"] and report["problem_score"] is None


@pytest.mark.parametrize(("fixture", "message"), [
    ("c16_hide_from_witness.py", "timing not confirmed"),  # profiler paused around the real work
    ("c16_witness_off_gpu.py", "no kernel"),  # outputs computed on the CPU under the witness
    ("c16_witness_pipe_inject.py", "forged witness"),  # rows written into ncu's stdout
])
def test_a_submission_that_fools_the_witness_process_is_rejected(fixture: str, message: str) -> None:
    _needs_ncu()
    report = evaluate_file("vector_add", CHEATS / fixture, "--device", "cuda", "--shapes", "ranked", "--mode",
                           "ranked", "--secret-seed-stdin", stdin="7\n")
    assert report["status"] == "REJECTED", report["message"]
    assert message in report["message"]
    assert not report["rank_eligible"] and report["problem_score"] is None


def test_an_honest_triton_kernel_passes_and_is_timed_by_its_device_span() -> None:
    report = evaluate_file("vector_add", GOOD / "triton_add.py", *QUICK, "--mode", "ranked")
    assert report["status"] == "PASSED", report["message"]
    timing = report["shapes"][0]["timing"]
    assert timing["ranked_source"] == "device_span"
    assert not report["flags"]
