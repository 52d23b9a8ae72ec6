"""The command line's summary of a report: one line per shape with its status, timings and score,
the failure's message where a shape did not pass, the problem score or why none, flags and notes,
and where the wall time went."""

from __future__ import annotations

from evaluator.harness.summary import human_summary
from evaluator.report import DeviceInfo, EvaluationReport, ShapeReport, SolFigures, Status, TimingStats


def timing(median_us: float, ranks: list[float] | None = None) -> TimingStats:
    return TimingStats(
        method="cupti",
        median_us=median_us,
        mean_us=median_us,
        min_us=median_us,
        max_us=median_us,
        std_us=0.0,
        n=120,
        ci95_low_us=median_us,
        ci95_high_us=median_us,
        ci95_half_width_rel=0.0042,
        converged=True,
        ranked_source="device_span",
        rank_median_us=ranks,
    )


SOL = SolFigures(
    flops={},
    bytes=1e9,
    t_sol_us=10.0,
    bound="memory",
    sol_fraction=0.5,
    score=0.6667,
    speedup=2.0,
    tflops=0.0,
    gbps=50.0,
)


def report(*shapes: ShapeReport, **fields: object) -> EvaluationReport:
    values: dict[str, object] = {
        "harness_version": "t",
        "problem": "vector_add",
        "problem_version": 1,
        "language": "python",
        "mode": "ranked",
        "status": Status.PASSED,
        "message": "all shapes passed",
        "shapes": list(shapes),
        "device": DeviceInfo(kind="cuda", name="NVIDIA H200", gpu_type="h200", development_device=False),
        "started_at": "s",
        "finished_at": "f",
        "wall_seconds": 12.34,
        "phase_seconds": {"compile": 1.5, "ranked": 7.25},
    }
    return EvaluationReport.model_validate({**values, **fields})


def passed(shape_id: str = "n1048576") -> ShapeReport:
    return ShapeReport(
        shape_id=shape_id,
        axes={"N": 1},
        ranked=True,
        status=Status.PASSED,
        timing=timing(20.0),
        baseline_timing=timing(40.0),
        sol=SOL,
    )


def test_a_passed_ranked_shape_shows_its_timings_and_score() -> None:
    text = human_summary(report(passed(), problem_score=0.6667, rank_eligible=True))
    lines = text.splitlines()
    assert lines[0] == "vector_add v1 [python, ranked] on NVIDIA H200 (h200)"
    assert lines[1] == "status: PASSED  all shapes passed"
    assert "kernel 20.00 us +-0.42% (n=120, cupti/device_span)" in lines[2]
    assert "baseline 40.00 us" in lines[2] and "S=0.667 SOL=50.00% x2.00" in lines[2]
    assert "problem score: 0.6667 (rank eligible)" in lines
    assert lines[-1] == "wall: 12.3 s (compile 1.5, ranked 7.2)"


def test_a_failed_shape_shows_why_and_a_ranked_run_without_a_score_says_so() -> None:
    wrong = ShapeReport(shape_id="n4099", axes={"N": 4099}, ranked=False, status=Status.INCORRECT_NUMERICAL,
                        message="seed 1 / normal: outside tolerance: c")
    text = human_summary(report(passed(), wrong, status=Status.INCORRECT_NUMERICAL,
                                flags=["n1048576: events far above the span"], notes=["GPU throttled"]))
    line = next(line for line in text.splitlines() if "n4099" in line)
    assert "INCORRECT_NUMERICAL" in line and line.endswith("seed 1 / normal: outside tolerance: c")
    assert "not rank eligible" in text
    assert "flag: n1048576: events far above the span" in text and "note: GPU throttled" in text


def test_a_passed_shapes_notes_are_not_shown_as_a_failure() -> None:
    quiet = passed()
    quiet.message = "kernel returned a Tensor; ignored (outputs are written in place)"
    assert "ignored" not in human_summary(report(quiet))


def test_a_test_mode_run_and_a_multi_gpu_run_say_what_they_are() -> None:
    multi = passed("n4096")
    assert multi.timing is not None
    multi.timing.rank_median_us = [19.5, 20.0]
    text = human_summary(
        report(
            multi,
            mode="test",
            world_size=2,
            device=DeviceInfo(kind="cpu", name="Xeon", gpu_type="cpu", development_device=True),
        )
    )
    assert text.splitlines()[0] == "vector_add v1 [python, test, 2 ranks] on Xeon (cpu, development device)"
    assert "ranks 19.5/20.0 us" in text and "rank eligible" not in text
