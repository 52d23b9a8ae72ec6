"""The child process: the only place the submission's code runs.

``python -m evaluator.harness.child --in-fd R --out-fd W``. The parent sends the job's
configuration (no secret) over R; the child imports torch, initialises the device and warms up the
trusted paths (reference, baseline, profiler, NVML) BEFORE importing the submission, then records
the threads present and snapshots every callable a cheat would patch. Stages: compile (import),
test (correctness), ranked (timing). The secret seed arrives only after the import has been
checked; the sealing key only after every untrusted call finished and the process is quiescent.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import traceback
from pathlib import Path
from time import monotonic, perf_counter
from typing import Any

import torch

from evaluator.harness import anticheat, channel, work
from evaluator.harness.device import device_info
from evaluator.harness.report_status import CheckFailure
from evaluator.harness.submission import LoadedSubmission, SubmissionError, load
from evaluator.harness.timing import CallFailed, TimingConfig, TimingRejected, time_cpu
from evaluator.problems import get_problem

_os_exit = os._exit
#: Exit status of a child whose harness (not the submission) failed; the parent says so.
INTERNAL_ERROR_EXIT = 70


class Child:
    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.config = channel.read_frame(rfd)
        self.problem = get_problem(self.config["problem"])
        self.refmod = self.problem.reference_module()
        self.device = self.config["device"]
        self.shapes = [self.problem.shape(shape_id) for shape_id in self.config["shapes"]]
        self.result: dict[str, Any] = {"status": None, "message": "", "shapes": [], "flags": []}
        self.cold: Any = None
        self.nvml: Any = None
        self.submission: LoadedSubmission | None = None

    def send(self, message: dict[str, Any]) -> None:
        channel.write_all(self.wfd, channel.encode(message))

    def receive(self, expected: str) -> dict[str, Any]:
        message = channel.read_frame(self.rfd)
        if message.get("type") != expected:
            raise channel.ChannelError(f"expected {expected}, got {message.get('type')}")
        return message

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # ------------------------------------------------------------ before the submission

    def warm_up_trusted_paths(self) -> None:
        """Initialise everything that starts threads or loads libraries, before the import."""
        if self.device == "cuda":
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            import evaluator.harness.gpu_timing
            from evaluator.harness.l2 import ColdL2
            from evaluator.harness.telemetry import Nvml

            self.cold = ColdL2(torch.device("cuda"))
            uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
            self.nvml = Nvml(f"GPU-{uuid}" if uuid else None)
            with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            ):
                torch.ones(16, device="cuda").add_(1)
        if self.device == "cpu":
            torch.set_num_threads(1)  # steadier wall-clock timing on a shared development machine
        # A parallel CPU op starts the intra-op thread pool now, not during the first trial.
        spin = torch.randn(1 << 21)
        float((spin.double() - spin.double()).abs().sum())
        smallest = min(self.shapes, key=lambda shape: _numel(shape.axes), default=None)
        if smallest is not None:
            ctx = self.context(smallest, anticheat.Activity.now())
            inputs = self.refmod.generate_inputs(
                dict(smallest.axes), 0, self.device, self.problem.distributions[0]
            )
            outputs = work.corr.allocate_outputs(self.problem.outputs, smallest.axes, self.device)
            baseline = work.with_scalar_args(self.refmod.baseline, self.problem, smallest.axes)
            baseline(*ctx.ordered_inputs(inputs), *outputs.values())
            work.corr.poison_and_release(dict(self.refmod.reference(inputs, dict(smallest.axes))))
            work.corr.poison_and_release(outputs)
            self.sync()
        if self.config["language"] != "python":
            try:
                import evaluator.ptx.loader  # noqa: F401 - imported now so its functions are snapshotted
            except ImportError:
                pass

    def context(self, shape: Any, activity: Any) -> work.ShapeContext:
        return work.ShapeContext(
            self.problem,
            self.refmod,
            dict(shape.axes),
            shape.shape_id,
            self.device,
            activity,
            self.sync,
            getattr(self, "torch_state", None),
        )

    # ------------------------------------------------------------ stages

    def run(self) -> None:
        # Where the start-up goes (CLOCK_MONOTONIC is system-wide, so the parent's spawn time is
        # comparable): interpreter and imports (torch), the device context, the warm-up.
        marks = [float(self.config.get("spawned_monotonic") or monotonic()), monotonic()]
        self.device_facts = device_info(self.device)
        self.result["device"] = self.device_facts
        marks.append(monotonic())
        self.warm_up_trusted_paths()
        marks.append(monotonic())
        self.result["start_up_seconds"] = {
            name: round(max(end - begin, 0.0), 3)
            for name, begin, end in zip(("imports", "device_init", "warm_up"), marks, marks[1:])
        }
        self.activity = anticheat.Activity.now()
        self.torch_state = anticheat.TorchState.capture()
        self.integrity = anticheat.standard_integrity(anticheat.harness_modules() + [sys.modules["__main__"]])
        self.send({"type": "stage", "stage": "compile"})
        if not self.import_submission():
            return self.seal()
        self.send({"type": "imported"})
        secret = self.receive("seed").get("secret")
        self.send({"type": "stage", "stage": "test"})
        passed = self.test_stage(secret)
        if self.result["status"] is None:
            self.send({"type": "stage", "stage": "ranked"})
            self.ranked_stage(passed)
        self.seal()

    def import_submission(self) -> bool:
        spec = Path(self.config["spec"]) if self.config.get("spec") else None
        try:
            self.submission = load(
                self.config["language"], Path(self.config["file"]), spec, self.problem, self.device
            )
        except SubmissionError as error:
            self.result.update(status="COMPILE_ERROR", message=error.message)
            return False
        self.result["evidence"] = self.submission.evidence
        return self.verify_integrity("import")

    def verify_integrity(self, stage: str) -> bool:
        changed = self.integrity.changed()
        if changed:
            self.result.update(
                status="REJECTED", message=f"patched {', '.join(changed[:8])} during {stage} (class 4)"
            )
            return False
        problem = self.activity.problems(native=False)
        if problem:
            self.result.update(status="REJECTED", message=f"{problem} (after {stage})")
            return False
        return True

    def seeds(self, secret: int | None, shape_id: str) -> list[tuple[int, int | None]]:
        public = self.config["public_seeds"]
        if self.config["mode"] == "ranked" and secret is not None:
            return [(work.ranked_seed(secret, seed, shape_id), None) for seed in public]
        return [(seed, seed) for seed in public]

    def test_stage(self, secret: int | None) -> list[Any]:
        passed = []
        for index, shape in enumerate(self.shapes):
            self.send({"type": "progress", "stage": "test", "shape": shape.shape_id})
            started = perf_counter()
            report = self.shape_correctness(shape, secret)
            report["wall_seconds"] = perf_counter() - started
            self.result["shapes"].append(report)
            if not self.verify_integrity(f"the tests of {shape.shape_id}"):
                return []
            if report["status"] == "PASSED":
                passed.append((shape, report))
            if report.get("fatal"):
                self.skip_rest(
                    self.shapes[index + 1 :], "not run: an earlier CUDA fault poisoned the context"
                )
                break
        return passed

    def skip_rest(self, shapes: list[Any], why: str) -> None:
        for shape in shapes:
            self.result["shapes"].append(_shape_dict(shape, "RUNTIME_ERROR", why))

    def shape_correctness(self, shape: Any, secret: int | None) -> dict[str, Any]:
        ctx = self.context(shape, self.activity)
        assert self.submission is not None  # test_stage runs only after a successful import
        try:
            kernel = self.submission.kernel_for(dict(shape.axes))
            if self.config["language"] == "python":
                kernel = work.with_scalar_args(kernel, self.problem, shape.axes)
        except Exception as error:  # noqa: BLE001 - a native kernel that does not fit this shape
            return _shape_dict(shape, "COMPILE_ERROR", getattr(error, "message", None) or str(error))
        try:
            status, message, checks = work.correctness(ctx, kernel, self.seeds(secret, shape.shape_id))
        except CheckFailure as failure:
            report = _shape_dict(shape, failure.status, failure.message)
            report["fatal"] = self.context_poisoned()
            return report
        report = _shape_dict(shape, status, message)
        report["checks"] = checks
        report["kernel"] = kernel
        return report

    def context_poisoned(self) -> bool:
        if self.device != "cuda":
            return False
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1).item()
        except Exception:  # noqa: BLE001 - any error here means the context is gone
            return True
        return False

    def ranked_stage(self, passed: list[Any]) -> None:
        for shape, report in passed:
            self.send({"type": "progress", "stage": "ranked", "shape": shape.shape_id})
            started = perf_counter()
            self.time_shape(shape, report)
            report["wall_seconds"] += perf_counter() - started
            if not self.verify_integrity(f"the timing of {shape.shape_id}"):
                return

    def time_shape(self, shape: Any, report: dict[str, Any]) -> None:
        ctx = self.context(shape, self.activity)
        kernel = report.pop("kernel")
        budgets = self.config["budgets"]
        sets = work.build_sets(ctx, work.set_count(ctx, self.config["set_cap_bytes"]))
        report["telemetry_before"] = self.nvml.sample() if self.nvml else None
        try:
            # The baseline first: its launch overhead is the allowance the kernel's events get, its
            # host launch time sizes the launch gate both get.
            with anticheat.trusted_torch_state(self.torch_state):
                baseline_fn = work.with_scalar_args(self.refmod.baseline, self.problem, shape.axes)
                baseline = self.time_one(baseline_fn, sets, budgets["baseline"], math.inf)
            outcome = self.time_one(
                kernel, sets, budgets["kernel"], baseline.launch_excess_us, baseline.stats.get("gate_us")
            )
        except TimingRejected as error:
            report.update(status="REJECTED", message=str(error))
            return
        except CallFailed as error:
            report.update(
                status="RUNTIME_ERROR", message=f"during timing: {error}", fatal=self.context_poisoned()
            )
            return
        finally:
            work.release_sets(sets)
            report["telemetry_after"] = self.nvml.sample() if self.nvml else None
        report["timing"], report["baseline_timing"] = outcome.stats, baseline.stats
        report["flags"] = outcome.flags
        report["notes"] = outcome.notes + [f"baseline: {note}" for note in baseline.flags + baseline.notes]
        report["notes"] += telemetry_flags(report["telemetry_before"], report["telemetry_after"])

    def time_one(
        self, fn: Any, sets: list[Any], budget_s: float, launch_allowance_us: float, gate_us: float | None = None
    ) -> Any:
        config = TimingConfig(budget_s=budget_s, launch_allowance_us=launch_allowance_us, gate_us=gate_us)
        if self.device == "cuda":
            from evaluator.harness.gpu_timing import time_gpu

            return time_gpu(fn, sets, config, self.cold, self.activity)
        return time_cpu(fn, sets, config, self.activity)

    # ------------------------------------------------------------ sealing

    def seal(self) -> None:
        gc.disable()
        for shape in self.result["shapes"]:
            shape.pop("kernel", None)
            shape.pop("fatal", None)
        problems = anticheat.quiescence_problems(self.activity)
        if problems:
            self.send({"type": "unsealed", "reason": "; ".join(problems)})
            return
        anticheat.disarm_signals()
        self.send({"type": "ready"})
        key = bytes.fromhex(self.receive("key")["key"])
        body = json.dumps(self.result, allow_nan=False, default=str)
        self.send({"type": "report", "body": body, "mac": channel.seal(key, body)})


#: An SM clock after the timing below this fraction of the clock before it is no power cap: flagged.
CLOCK_DROP = 0.7


def telemetry_flags(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    flags = []
    if any((sample or {}).get("throttled") for sample in (before, after)):
        flags.append("GPU throttled during measurement")
    clock_before, clock_after = (before or {}).get("sm_clock_mhz"), (after or {}).get("sm_clock_mhz")
    if clock_before and clock_after and clock_after < CLOCK_DROP * clock_before:
        flags.append(f"SM clock fell from {clock_before} to {clock_after} MHz during the measurement")
    return flags


def _numel(axes: dict[str, int]) -> int:
    total = 1
    for value in axes.values():
        total *= max(int(value), 1)
    return total


def _shape_dict(shape: Any, status: str, message: str) -> dict[str, Any]:
    return {
        "shape_id": shape.shape_id,
        "axes": dict(shape.axes),
        "ranked": shape.ranked,
        "status": status,
        "message": message,
        "checks": [],
        "wall_seconds": 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    args = parser.parse_args(argv)
    code = 0
    try:
        Child(args.in_fd, args.out_fd).run()
    except BaseException:  # noqa: BLE001 - a harness failure: the parent reports it with this log
        traceback.print_exc()
        code = INTERNAL_ERROR_EXIT
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - the submission may have replaced or closed them
            pass
    _os_exit(code)


if __name__ == "__main__":
    main()
