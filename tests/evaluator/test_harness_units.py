"""Units of the harness that need no child process: statistics, the channel, correctness
comparison, integrity snapshots, trace attribution, witness arithmetic and report re-derivation."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

# The harness modules import torch: they come after the skip.
from evaluator.harness import anticheat, channel, correctness  # noqa: E402
from evaluator.harness.outcome import ShapeResult  # noqa: E402
from evaluator.harness.request import EvaluationRequest  # noqa: E402
from evaluator.harness.timing import stats, trace  # noqa: E402
from evaluator.problems import OutputTolerance  # noqa: E402
from evaluator.report import Status, Witness  # noqa: E402
from tests.harness_helpers import timed_result  # noqa: E402

# ---------------------------------------------------------------- statistics


def test_the_median_ci_brackets_the_median_and_narrows_with_more_samples() -> None:
    few = stats.summarize([float(x) for x in range(20)])
    many = stats.summarize([float(x % 20) for x in range(2000)])
    assert few.ci_low <= few.median <= few.ci_high
    assert many.ci_high - many.ci_low <= few.ci_high - few.ci_low


def test_the_ci_rank_formula_matches_the_binomial_table_for_n_100() -> None:
    # Exact distribution-free 95% CI of the median for n=100: order statistics 40 and 61 (1-based).
    low, high = stats.median_ci_ranks(100)
    assert (low + 1, high + 1) == (40, 61)


def test_convergence_needs_both_enough_samples_and_a_narrow_ci() -> None:
    flat = stats.summarize([10.0] * 50)
    assert stats.converged(flat, 0.005, 10)
    assert not stats.converged(stats.summarize([10.0] * 5), 0.005, 10)


# ---------------------------------------------------------------- channel


def test_frames_round_trip_and_a_seal_only_verifies_with_its_key() -> None:
    read_fd, write_fd = os.pipe()
    channel.write_all(write_fd, channel.encode({"type": "x", "n": 1}))
    assert channel.FrameReader(read_fd).next(time.monotonic() + 1) == {"type": "x", "n": 1}
    os.close(read_fd), os.close(write_fd)


def test_garbage_on_the_channel_is_an_error_not_a_message() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"\x00\x00\x00\x05hello")
    with pytest.raises(channel.ChannelError):
        channel.FrameReader(read_fd).next(time.monotonic() + 1)
    os.close(read_fd), os.close(write_fd)


def test_a_reader_times_out_when_nothing_arrives() -> None:
    read_fd, write_fd = os.pipe()
    with pytest.raises(channel.ChannelTimeout):
        channel.FrameReader(read_fd).next(time.monotonic() + 0.05)
    os.close(read_fd), os.close(write_fd)


# ---------------------------------------------------------------- correctness


def test_nan_where_the_reference_is_finite_always_fails() -> None:
    ref = torch.ones(10, dtype=torch.float64)
    out = torch.ones(10)
    out[3] = math.nan
    result = correctness.compare("c", out, ref, OutputTolerance(atol=1e9, rtol=1e9))
    assert result["nonfinite_count"] == 1
    assert result["matched_ratio"] == 0.9
    assert result["worst"][0]["index"] == [3]
    lenient = SimpleNamespace(tolerance_for=lambda name: OutputTolerance(1e9, 1e9, matched_ratio=0.5))
    assert not correctness.outputs_pass({"c": result}, lenient)


def test_the_tolerance_is_atol_plus_rtol_times_the_reference() -> None:
    ref = torch.tensor([100.0, 0.0], dtype=torch.float64)
    out = torch.tensor([100.5, 0.5])
    result = correctness.compare("c", out, ref, OutputTolerance(atol=0.1, rtol=0.01))
    assert result["matched_ratio"] == 0.5  # 0.5 <= 0.1 + 1.0 passes, 0.5 > 0.1 fails
    assert result["max_abs_error"] == pytest.approx(0.5)


def test_a_row_rms_tolerance_scales_with_each_rows_size() -> None:
    ref = torch.tensor([[100.0, 100.0], [1.0, 1.0]], dtype=torch.float64)
    out = torch.tensor([[105.0, 100.0], [2.0, 1.0]])
    result = correctness.compare("o", out, ref, OutputTolerance(atol=0.1, rtol=0.0, atol_scale="row_rms"))
    # Row 0: 5 <= 0.1 * 100 passes. Row 1: its RMS (1) is floored at 0.1 x the whole RMS (70.7),
    # so 1.0 > 0.1 * 7.07 fails: small rows get no absolute slack beyond the floor.
    assert result["matched_ratio"] == 0.75


def test_a_matching_nan_reference_is_matched_by_nan() -> None:
    ref = torch.tensor([math.nan, 1.0], dtype=torch.float64)
    out = torch.tensor([math.nan, 1.0])
    assert correctness.compare("c", out, ref, OutputTolerance(0.0, 0.0))["matched_ratio"] == 1.0


def test_poison_makes_floats_nan_and_fp8_nan() -> None:
    value = torch.zeros(4)
    correctness.poison_(value)
    assert torch.isnan(value).all()
    fp8 = torch.zeros(4, dtype=torch.float8_e4m3fn)
    correctness.poison_(fp8)
    assert torch.isnan(fp8.float()).all()


def test_the_digest_sees_a_single_changed_element_and_a_permutation() -> None:
    base = torch.randn(1001)
    changed = base.clone()
    changed[500] += 1
    assert correctness.digest(base) == correctness.digest(base.clone())
    assert correctness.digest(changed) != correctness.digest(base)
    assert correctness.digest(base.flip(0)) != correctness.digest(base)


def test_identity_checks_distinguish_dtype_shape_and_swapped_storage() -> None:
    out = torch.empty(8)
    expected = correctness.identity(out)
    assert correctness.check_identity("c", out, expected) is None
    out.resize_(7)
    assert correctness.check_identity("c", out, expected)[0] is Status.INCORRECT_SHAPE
    swapped = torch.empty(8)
    swapped.set_(torch.empty(8))
    assert (
        correctness.check_identity("c", swapped, correctness.identity(torch.empty(8)))[0] is Status.REJECTED
    )


# ---------------------------------------------------------------- integrity and activity


def test_the_integrity_snapshot_notices_a_patched_function_and_a_swapped_code_object() -> None:
    import types

    def timer() -> int:
        return 1

    module = types.ModuleType("victim")
    module.timer = timer  # type: ignore[attr-defined]
    snapshot = anticheat.Integrity()
    snapshot.watch_namespace("victim", module)
    assert snapshot.changed() == []
    module.timer.__code__ = (lambda: 0).__code__
    assert snapshot.changed() == ["victim.timer"]


def test_an_attribute_added_to_a_closed_class_is_noticed() -> None:
    class Event:
        def record(self) -> None: ...

    snapshot = anticheat.Integrity()
    snapshot.watch_namespace("Event", Event, closed=True)
    Event.elapsed_time = lambda self: 0.0  # type: ignore[attr-defined]
    assert snapshot.changed() == ["Event.elapsed_time (added)"]


def test_a_python_thread_started_after_the_reference_point_is_a_problem() -> None:
    import threading

    reference = anticheat.Activity.now()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    # children=False: this is about threads; a process another test left behind is not this test's
    try:
        assert "class 2" in (reference.problems(native=False, children=False) or "")
    finally:
        stop.set()
        thread.join()
    assert reference.problems(native=False, children=False) is None


def test_a_native_thread_started_after_the_reference_point_is_a_problem_python_cannot_see() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    reference = anticheat.Activity.now()
    thread = ctypes.c_ulong()
    # libc's sleep(2) as the start routine: a thread with no Python frame, joined below.
    assert libc.pthread_create(ctypes.byref(thread), None, ctypes.cast(libc.sleep, ctypes.c_void_p),
                               ctypes.c_void_p(2)) == 0
    try:
        assert reference.problems(native=False) is None  # invisible to Python's thread count
        assert "native threads started by the submission are running (class 2)" in (
            reference.problems() or ""
        )
    finally:
        libc.pthread_join(thread, None)
    assert reference.problems() is None


class FakeClock:
    """perf_counter_ns for time_cpu: only the timed function moves it, by the durations it is given."""

    def __init__(self, durations_us: list[float]) -> None:
        self.now_ns, self.durations_us, self.calls = 0, durations_us, 0

    def __call__(self) -> int:
        return self.now_ns

    def advance(self) -> None:
        self.now_ns += int(self.durations_us[self.calls % len(self.durations_us)] * 1000)
        self.calls += 1


def test_cpu_timing_reports_the_median_mean_and_extremes_of_the_calls_it_timed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.harness.timing import loop as timing

    clock = FakeClock([20.0, 100.0, 100.0])  # two calls in three take 100 us, one takes 20 us
    monkeypatch.setattr(timing, "perf_counter_ns", clock)
    a, b = torch.arange(4.0), torch.ones(4)

    def kernel(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        torch.add(x, y, out=out)
        clock.advance()

    def input_set() -> timing.TimedSet:
        c = torch.empty(4)
        return timing.TimedSet([a, b], [c], refresh=lambda: None,
                               verify=lambda: None if torch.equal(c, a + b) else "wrong sum")

    config = timing.TimingConfig(budget_s=0.2, warmup_calls=3, warmup_s=0.0)
    stats = timing.time_cpu(kernel, [input_set(), input_set()], config, anticheat.Activity.now()).stats
    timed_calls = [20.0, 100.0, 100.0] * stats["n"]
    durations = timed_calls[
        config.warmup_calls : config.warmup_calls + stats["n"]
    ]  # warm-up moved the clock too
    assert stats["median_us"] == 100.0 and stats["min_us"] == 20.0 and stats["max_us"] == 100.0
    assert stats["mean_us"] == pytest.approx(sum(durations) / len(durations))
    assert stats["n"] == len(durations) >= config.min_samples and stats["method"] == "wall"


def test_cpu_timing_asks_for_the_next_inputs_the_moment_a_call_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the judge serving the sets, asking for the next one stops the judge's clock of the call:
    it must come before this process's own checks, and the last call is followed by one too."""
    from evaluator.harness.timing import loop as timing

    events: list[str] = []

    def input_set(name: str) -> timing.TimedSet:
        return timing.TimedSet(
            [torch.ones(2)],
            [torch.empty(2)],
            refresh=lambda: events.append(f"prepare {name}"),
            verify=lambda: events.append(f"check {name}") and None,
        )

    def kernel(x: torch.Tensor, out: torch.Tensor) -> None:
        events.append("call")
        out.copy_(x)

    monkeypatch.setattr(timing, "_sample_checks", lambda count, batch: set(range(batch)))  # check every call
    config = timing.TimingConfig(budget_s=0.0, warmup_calls=1, warmup_s=0.0, min_samples=1)
    timing.time_cpu(kernel, [input_set("A"), input_set("B")], config, anticheat.Activity.now())
    assert events[:3] == ["prepare A", "call", "prepare B"]  # warm-up: one call
    timed = events[3:]
    assert timed[:6] == ["call", "prepare A", "check B", "call", "prepare B", "check A"]
    assert len(timed) == 3 * 16 and timed[-3:] == ["call", "prepare B", "check A"]  # one batch of 16
    with pytest.raises(ValueError, match="two input sets"):
        timing.time_cpu(kernel, [input_set("A")], config, anticheat.Activity.now())


# ---------------------------------------------------------------- trace attribution


@dataclass
class FakeEvent:
    """A stand-in for torch's _KinetoEvent with the accessors ``trace`` uses."""

    kind: str
    label: str
    start: int
    end: int
    corr: int = 0
    linked: int = 0
    resource: int = 7

    def device_type(self) -> str:
        return f"DeviceType.{self.kind}"

    def name(self) -> str:
        return self.label

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def correlation_id(self) -> int:
        return self.corr

    def linked_correlation_id(self) -> int:
        return self.linked

    def device_resource_id(self) -> int:
        return self.resource


def _batch(side_stream_end: int) -> list[FakeEvent]:
    return [
        FakeEvent("CPU", "sb#c0", 100, 200),
        FakeEvent("CPU", "cudaLaunchKernel", 110, 120, corr=1),
        FakeEvent("CPU", "cudaLaunchKernel", 130, 140, corr=2),
        FakeEvent("CPU", "sb#m0", 210, 230),
        FakeEvent("CPU", "cudaLaunchKernel", 215, 220, corr=3),
        FakeEvent("CUDA", "add_kernel", 150, 400, corr=1),
        FakeEvent("CUDA", "side_kernel", 160, side_stream_end, corr=2, resource=9),
        FakeEvent("CUDA", "marker", 410, 420, corr=3),
    ]


def test_a_call_spans_its_operations_on_every_stream() -> None:
    batch = trace.attribute(_batch(side_stream_end=390))
    call = batch.calls[0]
    assert call.span_ns == 250
    assert call.names == ["add_kernel", "side_kernel"]
    assert call.marker.name == "marker"
    assert call.unjoined() == []


def test_an_operation_still_running_on_another_stream_after_the_marker_starts_is_unjoined() -> None:
    call = trace.attribute(_batch(side_stream_end=900)).calls[0]
    assert [op.name for op in call.unjoined()] == ["side_kernel"]


def test_device_work_launched_outside_every_range_is_a_stray() -> None:
    events = _batch(390) + [
        FakeEvent("CPU", "cudaLaunchKernel", 600, 610, corr=4),
        FakeEvent("CUDA", "late_kernel", 620, 700, corr=4),
    ]
    assert [op.name for op in trace.attribute(events).strays] == ["late_kernel"]


# ---------------------------------------------------------------- report re-derivation


# ---------------------------------------------------------------- Nsight Compute parsing

#: Columns of a real `ncu --csv --page raw` export (H200, ncu 2025.3), trimmed to what we read.
NCU_RAW = (
    '"ID","Kernel Name","Block Size","Grid Size","gpu__time_duration.sum","launch__registers_per_thread",'
    '"launch__shared_mem_per_block","sm__throughput.avg.pct_of_peak_sustained_elapsed",'
    '"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","lts__t_sector_hit_rate.pct",'
    '"sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","smsp__inst_executed.sum"\n'
    '"","","","","us","register/thread","Kbyte/block","%","%","%","%","inst","inst","inst","inst"\n'
    '"0","nvjet_sm90_tst_128x64","(384, 1, 1)","(8, 14, 1)","23.136000","168","214.292000","42.76",'
    '"69.30","15.67","14.45","8.994522","1.778571","1.000071","2,511,482.000000"\n'
)


def test_an_ncu_raw_export_becomes_a_kernel_profile_with_units_applied() -> None:
    from evaluator.harness.witness.profile import parse_raw_csv

    (kernel,) = parse_raw_csv(NCU_RAW)
    assert kernel.duration_us == pytest.approx(23.136)
    assert kernel.shared_memory_bytes == 214292
    assert kernel.registers_per_thread == 168
    assert kernel.dram_throughput_pct == pytest.approx(69.30)
    assert [stall.reason for stall in kernel.top_stalls] == ["long_scoreboard", "wait"]
    assert kernel.executed_instructions["total"] == 2511482


# ---------------------------------------------------------------- calibration file


def test_a_calibration_file_yields_only_the_ceilings_sol_understands(tmp_path: Path) -> None:
    from evaluator.commands.run_cmd import _calibration

    path = tmp_path / "calibration.json"
    path.write_text(
        '{"device": "NVIDIA H200", "runs": 9, "ceilings": {"bf16_tensor_tflops": 720.5, "hbm_tbps": 4.2}}'
    )
    assert _calibration(path) == {"bf16_tensor_tflops": 720.5, "hbm_tbps": 4.2}
    flat = tmp_path / "flat.json"
    flat.write_text('{"hbm_tbps": 4.1, "runs": 9}')
    assert _calibration(flat) == {"hbm_tbps": 4.1}


# ---------------------------------------------------------------- the parent's re-derivation


def _timing(median_us: float) -> dict[str, object]:
    return {
        "method": "cupti",
        "median_us": median_us,
        "mean_us": median_us,
        "min_us": median_us,
        "max_us": median_us,
        "std_us": 0.0,
        "n": 100,
        "ci95_low_us": median_us,
        "ci95_high_us": median_us,
        "ci95_half_width_rel": 0.0,
        "converged": True,
        "ranked_source": "device_span",
    }


def _witness(median_us: float, confirmed: bool = True) -> Witness:
    return Witness(source="ncu", median_us=median_us, n=3, kernels_per_call=1, floor_us=0.9 * median_us,
                   confirmed=confirmed, message="" if confirmed else "timing not confirmed: test")


def _shapes(kernel_us: dict[str, float], witnessed: bool = True) -> list[ShapeResult]:
    return [
        ShapeResult(shape_id=shape_id, axes={}, ranked=False, status=Status.PASSED, timing=_timing(us),
                    baseline_timing=_timing(2 * us), witness=_witness(us) if witnessed else None)
        for shape_id, us in kernel_us.items()
    ]


def _build(kernel_us: dict[str, float], secret: int | None = 7, shapes=None):  # type: ignore[no-untyped-def]
    from evaluator.harness.assemble import build
    from evaluator.harness.outcome import JudgeOutcome
    from evaluator.problems import get_problem

    problem = get_problem("vector_add")
    request = EvaluationRequest(problem="vector_add", file=Path(__file__), mode="ranked", secret_seed=secret)
    device = {"kind": "cuda", "name": "NVIDIA H200", "gpu_type": "h200", "development_device": False}
    outcome = JudgeOutcome(device=device, shapes=shapes if shapes is not None else _shapes(kernel_us))
    return build(request, problem, list(kernel_us), outcome, "2026-01-01T00:00:00+00:00", 1.0)


RANKED_US = {"n1048576": 20.0, "n16777216": 80.0, "n268435456": 1200.0}


def test_the_judge_computes_scores_and_the_problem_score_from_the_timings() -> None:
    report = _build(RANKED_US)
    assert report.rank_eligible and report.witnessed
    scores = [shape.sol.score for shape in report.shapes]
    assert report.problem_score == pytest.approx(math.prod(scores) ** (1 / 3))
    assert all(shape.ranked for shape in report.shapes)  # the catalogue's word, not the child's


def test_a_faster_than_light_shape_is_rejected_with_its_figures_shown() -> None:
    report = _build({**RANKED_US, "n16777216": 1.0})  # 201 MB in 1 us: impossible
    shape = next(shape for shape in report.shapes if shape.shape_id == "n16777216")
    assert shape.status is Status.REJECTED and shape.message.startswith("faster than light")
    assert shape.timing is not None and shape.sol is not None and shape.sol.faster_than_light
    assert report.status is Status.REJECTED and not report.rank_eligible and report.problem_score is None


def test_the_judges_clock_is_taken_over_the_calls_it_checked() -> None:
    from evaluator.harness.single.timing_service import judge_clock

    # A submission that skips the work on the calls it hopes go unchecked: 1 us each, while every
    # call the judge checked (chosen after the call) did the work, 900-1100 us.
    # (The median over every call, 1 us, would have confirmed any claim.)
    clock = judge_clock([900.0, 1000.0, 1100.0], calls=19, checks=3)
    assert clock.round_trip_us == 1000.0 and clock.round_trip_low_us == 900.0
    assert clock.calls == 19 and clock.checked_calls == 3
    assert judge_clock([], calls=0, checks=0).round_trip_us is None


class ScriptedChild:
    """A child that answers the judge's timing service from a script of (seconds to wait, message)."""

    def __init__(self, script: list[tuple[float, dict[str, Any]]]) -> None:
        self.script, self.sent = list(script), []
        self.reader = SimpleNamespace(wake_queue_ns=0)

    def receive(self, *expected: str) -> dict[str, Any]:
        wait, message = self.script.pop(0)
        time.sleep(wait)
        if message["type"] not in expected:
            from evaluator.harness.parent import ProtocolViolation

            raise ProtocolViolation(f"unexpected {message['type']}")
        return message

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message["type"])

    def limit_call(self, what: str, limit_s: float, rule: str) -> None:
        self.limits = [*getattr(self, "limits", []), (what, limit_s)]

    def end_call(self) -> None:
        pass


def _serving(device: str, script: list[tuple[float, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch,
             draw: Callable[[int], int] = lambda n: 0) -> Any:
    """A KernelTimingService on two fake input sets, every call checked (``draw`` 0: the judge's
    random draw for each call), every check passing."""
    from evaluator.harness.single import timing_service

    monkeypatch.setattr(timing_service.secrets, "randbelow", draw)
    judge = SimpleNamespace(
        device=device, child=ScriptedChild(script), sync=lambda: None,
        take_outputs=lambda outputs: {"y": outputs[0].clone()},
        refmod=SimpleNamespace(generate_inputs=lambda *args: {}),
        verify=lambda *args: (Status.PASSED, "", {}), write_inputs=lambda *args: None,
        problem=SimpleNamespace(outputs=[SimpleNamespace(name="y")]),
    )
    judge.limit_call = lambda shape_id, what, first: judge.child.limit_call(what, 15.0 if first else 1.0, "")
    service = timing_service.KernelTimingService.__new__(timing_service.KernelTimingService)
    service.__dict__.update(
        judge=judge,
        shape=SimpleNamespace(axes={}, shape_id="s"),
        ctx=None,
        distribution="normal",
        seeds={},
        calls=0,
        checks=0,
        last_round_trip_us=None,
        checked_round_trips_us=[],
        failure=None,
        checked_index=None,
        prefetching=device == "cpu",
        answered=None,
        sets=[([], [torch.zeros(2)], None) for _ in range(2)],
    )
    return service


def test_the_gpu_judges_clock_stops_at_done_not_at_the_childs_bookkeeping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the H200, with the clock ended by the next request, a call followed by the profiler's
    batch end or by the child's statistics (the last one) kept the judge waiting 6-10 ms more than
    it took, and honest kernels were REJECTED for hidden host work (class 14)."""
    call, bookkeeping = 0.01, 0.06
    script = [(0.0, {"type": "next", "set": 0})]
    for index in range(1, 4):
        script += [(call, {"type": "done"}), (bookkeeping, {"type": "next", "set": index % 2})]
    script += [(call, {"type": "done"}), (bookkeeping, {"type": "timed", "stats": {}})]
    service = _serving("cuda", script, monkeypatch)
    assert service._loop()["type"] == "timed"
    assert service.calls == 4 and service.checks == 4  # the last call is not checked twice
    assert len(service.checked_round_trips_us) == 4
    assert all(
        0.9 * call * 1e6 <= waited < 0.9 * bookkeeping * 1e6 for waited in service.checked_round_trips_us
    )
    assert service.judge.child.sent == ["go"] * 4


def test_a_last_gpu_call_without_done_is_judged_but_not_clocked(monkeypatch: pytest.MonkeyPatch) -> None:
    script = [
        (0.0, {"type": "next", "set": 0}),
        (0.01, {"type": "next", "set": 1}),
        (0.05, {"type": "timed"}),
    ]
    service = _serving("cuda", script, monkeypatch)
    service._loop()
    assert service.checks == 2 and len(service.checked_round_trips_us) == 1  # the first call's clock only
    assert 9_000 <= service.checked_round_trips_us[0] < 40_000


def test_a_last_gpu_call_checked_for_want_of_checks_keeps_the_clock_it_ended_with_done(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 that clock was dropped, and on 27 of 172 ranked shapes no call the judge checked
    had one: no bound on hidden host work there."""
    script = [(0.0, {"type": "next", "set": 0}), (0.01, {"type": "done"}), (0.05, {"type": "timed"})]
    service = _serving("cuda", script, monkeypatch, draw=lambda n: 1)  # no call checked at random
    service._loop()
    assert service.checks == 1 and len(service.checked_round_trips_us) == 1
    assert 9_000 <= service.checked_round_trips_us[0] < 40_000  # the call, not the child's statistics


def test_calls_are_checked_more_often_until_the_minimum_was(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.harness.single.timing_service import CHECK_EARLY_ONE_IN, CHECK_ONE_IN, MIN_CHECKS

    odds: list[int] = []
    script = [(0.0, {"type": "next", "set": 0})]
    for index in range(1, 6):
        script += [(0.0, {"type": "done"}), (0.0, {"type": "next", "set": index % 2})]
    script += [(0.0, {"type": "done"}), (0.0, {"type": "timed"})]
    service = _serving("cuda", script, monkeypatch, draw=lambda n: odds.append(n) or 0)
    service._loop()
    assert odds == [CHECK_EARLY_ONE_IN] * MIN_CHECKS + [CHECK_ONE_IN] * (6 - MIN_CHECKS)
    assert CHECK_EARLY_ONE_IN < CHECK_ONE_IN


def test_done_is_accepted_once_per_call_and_only_from_a_gpu_child(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.harness.parent import ProtocolViolation

    twice = [(0.0, {"type": "next", "set": 0}), (0.0, {"type": "done"}), (0.0, {"type": "done"})]
    with pytest.raises(ProtocolViolation, match="without a call"):
        _serving("cuda", twice, monkeypatch)._loop()
    with pytest.raises(ProtocolViolation, match="without a call"):
        _serving("cuda", [(0.0, {"type": "done"})], monkeypatch)._loop()
    with pytest.raises(ProtocolViolation, match="unexpected done"):
        _serving("cpu", [(0.0, {"type": "next", "set": 0}), (0.0, {"type": "done"})], monkeypatch)._loop()


def test_a_timing_answer_without_stats_or_reason_is_a_forged_report() -> None:
    from evaluator.harness.single.timing_service import KernelTimingService

    service = KernelTimingService.__new__(KernelTimingService)
    service.result = timed_result({})
    # What a child whose json encoder blanks the "problem" of its "timed" answer sends.
    service._record({"type": "timed", "problem": None}, SimpleNamespace(stats={}, flags=[], notes=[]))
    assert service.result.status is Status.REJECTED and "forged report" in service.result.message


def test_the_readers_wake_up_delay_counts_only_after_the_frame_arrived() -> None:
    read_fd, write_fd = os.pipe()
    reader = channel.FrameReader(read_fd)
    reader.wake_queue_ns = 123
    channel.write_all(write_fd, channel.encode({"type": "x"}))
    time.sleep(0.05)  # the frame waits for the reader: none of this is the reader's run-queue time
    reader.next(time.monotonic() + 1)
    assert 0 <= reader.wake_queue_ns < 20_000_000
    assert channel.own_run_queue_ns() > 0  # the kernel keeps the accounting here (schedstat)
    os.close(read_fd)
    os.close(write_fd)


def test_a_median_its_witness_does_not_confirm_is_rejected() -> None:
    shapes = _shapes(RANKED_US)
    shapes[1].witness = _witness(500.0, confirmed=False)
    report = _build(RANKED_US, shapes=shapes)
    assert report.shapes[1].status is Status.REJECTED
    assert "timing not confirmed" in report.shapes[1].message
    assert not report.rank_eligible


def test_a_result_without_a_witness_is_provisional_and_never_rank_eligible() -> None:
    report = _build(RANKED_US, shapes=_shapes(RANKED_US, witnessed=False))
    assert report.status is Status.PASSED
    assert not report.witnessed and not report.rank_eligible and report.problem_score is None


def test_a_flag_on_an_unranked_shape_is_a_note_and_costs_no_ranking() -> None:
    kernel_us = {**RANKED_US, "n4099": 3.0}
    shapes = _shapes(kernel_us)
    shapes[-1].flags = ["events far above the span (class 14)"]
    report = _build(kernel_us, shapes=shapes)
    assert report.rank_eligible and report.flags == []
    assert any("n4099: events far above" in note for note in report.notes)
    shapes = _shapes(kernel_us)
    shapes[0].flags = ["events far above the span (class 14)"]
    assert not _build(kernel_us, shapes=shapes).rank_eligible


def test_ranked_mode_without_a_secret_seed_is_never_rank_eligible() -> None:
    assert not _build(RANKED_US, secret=None).rank_eligible


def test_a_missing_ranked_shape_blocks_ranking() -> None:
    report = _build({"n1048576": 20.0, "n16777216": 80.0})
    assert report.status is Status.PASSED
    assert not report.rank_eligible


def test_a_child_that_dies_before_loading_the_submission_is_the_evaluators_failure(tmp_path: Path) -> None:
    from evaluator.harness.single.judge import Judge
    from evaluator.harness.stages import HarnessFailure
    from evaluator.problems import get_problem

    request = EvaluationRequest(problem="vector_add", file=Path(__file__), device="cpu")
    judge = Judge(
        request,
        get_problem("vector_add"),
        ["n4099"],
        {"type": "config", "problem": "no_such_problem"},
        tmp_path,
    )
    with pytest.raises(HarnessFailure, match="no_such_problem"):
        judge.run()


# ---------------------------------------------------------------- witness arithmetic


def _witnessed(reported_us: float, calls_us: list[float], kernels: int = 1, round_trip: float | None = None,
               gate_us: float = 20.0) -> Witness:
    from evaluator.harness.witness.witnesses import gpu_witness

    return gpu_witness(
        timed_result({**_timing(reported_us), "gate_us": gate_us}, round_trip), calls_us, kernels
    )


def test_an_honest_median_a_little_below_ncu_is_confirmed() -> None:
    # ncu adds ~1-1.4 us per kernel: 4.13 us (CUPTI) against 5.25 us (ncu) on the H200.
    assert _witnessed(4.13, [5.25, 5.3, 5.2]).confirmed
    assert _witnessed(179.2, [177.9, 178.5, 180.0]).confirmed


def test_a_median_far_below_what_ncu_measured_is_not_confirmed() -> None:
    witness = _witnessed(5.0, [2000.0, 2001.0, 1999.0])
    assert not witness.confirmed and "timing not confirmed" in witness.message
    # The first call is the warm-up: the witness is the lower of the other two.
    assert witness.warmup_calls == 1 and witness.median_us == 1999.0
    assert witness.floor_us == pytest.approx(1999.0 * 0.9 - 3.5)


def test_work_the_timestamps_do_not_show_fails_the_judges_clock() -> None:
    witness = _witnessed(5.0, [5.2, 5.3, 5.1], round_trip=3000.0)
    assert not witness.confirmed and "class 14" in witness.message
    assert _witnessed(5.0, [5.2, 5.3, 5.1], round_trip=400.0).confirmed


def test_the_host_work_slack_covers_the_honest_calls_measured_on_the_h200() -> None:
    # Hidden (judge's clock - gate - median) of honest calls on the H200: 1947 us on a 9.1 ms call
    # (moe_unpermute); 3677 us on a 5.4 ms call (fp8_blockscaled_gemm's example), 1816 us
    # on a 2.2 ms one (w4a16_gemm's baseline), 1179 us on a 74 us one (silu_and_mul's baseline).
    for reported, ncu, hidden in [
        (9122.7, 8852.9, 1947.0),
        (5406.1, 5314.1, 3677.1),
        (2160.1, 2103.2, 1816.1),
        (74.0, 75.1, 1179.0),
    ]:
        assert _witnessed(
            reported, [ncu] * 3, round_trip=1000.0 + reported + hidden, gate_us=1000.0
        ).confirmed
    # Beyond 2000 us + 75% of the median it is host work (class 14).
    assert not _witnessed(74.0, [75.1] * 3, round_trip=1000.0 + 74.0 + 2100.0, gate_us=1000.0).confirmed
    assert not _witnessed(5406.1, [5314.1] * 3, round_trip=1000.0 + 5406.1 + 6200.0, gate_us=1000.0).confirmed


@pytest.mark.parametrize("gate_us", [1e9, math.inf, math.nan, -5.0, "soon"])
def test_a_claimed_gate_excuses_no_more_than_the_longest_gate_the_harness_sets(gate_us: Any) -> None:
    """The gate comes from the child's statistics: a forged one must not swallow hidden host work."""
    witness = _witnessed(5.0, [5.2, 5.3, 5.1], round_trip=4000.0, gate_us=gate_us)
    assert not witness.confirmed and "class 14" in witness.message


@dataclass
class Row:
    name: str
    duration_us: float | None
    launch_id: int = 0


def _rows(*names_and_us: tuple[str, float]) -> list[Row]:
    return [Row(name, us, index) for index, (name, us) in enumerate(names_and_us)]


M = ("spin_kernel(long)", 2.0)


def test_kernels_are_attributed_to_calls_between_markers_after_the_import() -> None:
    from evaluator.harness.witness.witnesses import attribute

    rows = _rows(("autotune_a", 9.0), M, ("gemm", 10.0), ("epilogue", 1.0), M, M, ("gemm", 11.0), M)
    calls = attribute(rows, 2)
    assert calls.problem is None
    assert calls.per_call_us == [11.0, 11.0] and calls.kernels_per_call == [2, 1]


def test_a_kernel_between_calls_or_a_forged_marker_leaves_the_result_unwitnessed() -> None:
    from evaluator.harness.witness.witnesses import attribute

    assert "between witnessed calls" in str(attribute(_rows(M, ("k", 1.0), M, ("late", 5.0)), 1).problem)
    assert "calls, 1 were made" in str(attribute(_rows(M, ("k", 1.0), M, M, ("k", 1.0), M), 1).problem)


def test_duplicate_kernel_ids_in_ncus_output_mean_it_was_tampered_with() -> None:
    from evaluator.harness.witness.witnesses import parse_ncu_output

    forged = (
        NCU_RAW + '"0","nvjet_fake","(1, 1, 1)","(1, 1, 1)","0.001","1","0","1","1","1","1","1","1","1","1"\n'
    )
    with pytest.raises(ValueError, match="tampered"):
        parse_ncu_output(forged)
    assert len(parse_ncu_output(NCU_RAW)) == 1


# ---------------------------------------------------------------- torch global state


def test_the_reference_runs_under_the_switches_captured_before_the_import() -> None:
    from evaluator.harness.anticheat import TorchState, trusted_torch_state

    matmul = torch.backends.cuda.matmul
    original = matmul.allow_tf32
    trusted = TorchState.capture()
    try:
        matmul.allow_tf32 = not original  # what a submission might do at import
        with trusted_torch_state(trusted):
            assert matmul.allow_tf32 == original
        assert matmul.allow_tf32 == (not original)  # the submission's own value is back
    finally:
        matmul.allow_tf32 = original


def test_a_collapsed_sm_clock_is_noted_but_a_power_cap_is_not() -> None:
    from evaluator.harness.single.timing_service import telemetry_notes

    assert telemetry_notes({"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1755}) == []
    assert "SM clock fell" in telemetry_notes({"sm_clock_mhz": 1980}, {"sm_clock_mhz": 990})[0]


def test_a_shape_below_the_t_sol_of_derived_counts_passes_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts an import derived automatically are an estimate that can exceed the real work (a
    causal mask counted in full): a time below their t_SOL is a note about the counts, not class 17."""
    from evaluator.harness.assemble import ESTIMATED_LIGHT_NOTE
    from evaluator.problems import get_problem

    monkeypatch.setitem(get_problem("vector_add").imported, "counts", "derived")
    report = _build({**RANKED_US, "n16777216": 1.0})
    shape = next(shape for shape in report.shapes if shape.shape_id == "n16777216")
    assert shape.status is Status.PASSED and shape.message == ESTIMATED_LIGHT_NOTE
    assert shape.sol is not None and shape.sol.counts_estimated and not shape.sol.faster_than_light
    assert shape.sol.sol_fraction > 1 and shape.sol.score == 1.0
    assert report.status is Status.PASSED and report.rank_eligible
