"""The ranked figure: a time the submission cannot lower (issue 33, items 5 and 6). Pure rules on
real-shaped numbers; the CPU path and the site have their own tests (test_cpu_ranked_time.py,
tests/leaderboard/test_dispatch_cpu_board.py)."""

from __future__ import annotations

import pytest

from evaluator.report import ShapeReport
from evaluator.scoring import (
    WITNESS_PER_KERNEL_US,
    ranked_cpu_us,
    ranked_gpu_us,
    ranked_time,
    witness_allowance_us,
)

#: The cuBLAS GEMM example (``torch.matmul(A, B.t(), out=C)``) through a runner on the H200 (3482640,
#: 2026-12-03; benchmarks/results/data/runner_jobs_h200.json, source r15/3_recheck/runner_examples):
#: shape -> (the child's median, ncu's witness, kernels per call), microseconds.
GEMM_H200 = {
    "m1_n7168_k5120": (21.92, 25.056, 2),
    "m16_n7168_k5120": (19.648, 21.024, 1),
    "m128_n7168_k5120": (21.152, 22.368, 1),
    "m1024_n7168_k5120": (109.407, 110.112, 1),
    "m4096_n7168_k5120": (368.959, 367.232, 1),
    "m8192_n7168_k5120": (734.733, 732.448, 1),
    "m4096_n4096_k4096": (175.775, 174.112, 1),
    "m8192_n8192_k8192": (1364.268, 1361.504, 1),
}


@pytest.mark.parametrize("forged", [0.91, 0.96])
def test_a_forged_claim_of_the_cublas_gemm_gains_nothing_above_one_percent(forged: float) -> None:
    """Issue 33 item 5: at 0.91 x its truth the forged GEMM ranked first through a runner (0.622
    against 0.499), at 0.96 x it passed every shape. Ranked now on what ncu measured, it gains at most
    1% on every shape of 20 us or more, but one: on 4096^3 the honest median itself ran 1.0% above
    ncu's time of the same kernel (a GEMM measured alone under the profiler runs at a higher clock
    than in a loop), and that much is left (1.25%, docs/security.md)."""
    for shape, (claim, witness, kernels) in GEMM_H200.items():
        honest = ranked_gpu_us(claim, witness, kernels)
        lowered = ranked_gpu_us(claim * forged, witness, kernels)
        gain = 1 - lowered / honest
        if claim < 20:
            continue
        limit = 0.0125 if shape == "m4096_n4096_k4096" else 0.01
        assert gain <= limit, (shape, gain)


def test_the_ranked_time_is_never_below_the_witness_less_half_a_microsecond_a_kernel() -> None:
    for claim in (0.0, 1.0, 100.0):
        assert ranked_gpu_us(claim, 200.0, 3) >= 200.0 - 3 * WITNESS_PER_KERNEL_US
    assert ranked_gpu_us(250.0, 200.0, 3) == 250.0  # a claim above it stands: the span holds gaps and copies
    # Short calls get up to 1 us more a kernel (ncu's 1-2 us offset on a 4 us kernel), nothing from 20 us.
    assert witness_allowance_us(5.0, 1) == pytest.approx(0.5 + 0.75)
    assert witness_allowance_us(20.0, 2) == pytest.approx(1.0)


def test_an_honest_short_kernel_is_ranked_on_its_own_median() -> None:
    # vector_add 2^20 on the H200 (9f062ee, 2026-12-04): CUPTI 4.22 us, ncu 5.12 us.
    assert ranked_gpu_us(4.22, 5.12, 1) == 4.22


def test_the_cpu_rule_ranks_the_judges_clock_less_its_overhead() -> None:
    # vector_add n65537 on this project's CPU machine: the judge waited 110 us, 90 of them its own.
    assert ranked_cpu_us(0.001, judge_us=110.0, overhead_us=90.0) == pytest.approx(20.0)
    assert ranked_cpu_us(25.0, judge_us=110.0, overhead_us=90.0) == 25.0
    assert ranked_cpu_us(1.0, judge_us=50.0, overhead_us=-3.0) == 50.0  # a negative overhead is none


def _shape(claim: float, baseline: float, witness: dict[str, object] | None) -> ShapeReport:
    stats = {"method": "cupti", "mean_us": claim, "min_us": claim, "max_us": claim, "std_us": 0.0, "n": 10,
             "ci95_low_us": claim, "ci95_high_us": claim, "ci95_half_width_rel": 0.0, "converged": True,
             "ranked_source": "device_span"}
    return ShapeReport.model_validate({
        "shape_id": "s", "axes": {}, "ranked": True, "status": "PASSED",
        "timing": {**stats, "median_us": claim},
        "baseline_timing": {**stats, "median_us": baseline, "mean_us": baseline},
        "witness": witness,
    })


def test_ranked_time_reads_the_rule_from_the_witness_it_has() -> None:
    ncu = {"source": "ncu", "median_us": 200.0, "n": 3, "kernels_per_call": 2, "floor_us": 170.0,
           "confirmed": True}
    times = ranked_time(_shape(150.0, 300.0, ncu))
    assert times is not None and times.kernel_us == pytest.approx(199.0) and times.raised
    assert times.baseline_us == 300.0  # timed by the judge on a GPU
    cpu = {"source": "judge_wall", "median_us": 60.0, "n": 40, "floor_us": -970.0, "confirmed": True,
           "overhead_us": 40.0, "baseline_us": 45.0}
    times = ranked_time(_shape(0.001, 4.0, cpu))
    assert (
        times is not None
        and times.kernel_us == pytest.approx(20.0)
        and times.baseline_us == pytest.approx(5.0)
    )
    unwitnessed = ranked_time(_shape(150.0, 300.0, None))
    assert unwitnessed is not None and unwitnessed.kernel_us == 150.0 and not unwitnessed.raised
