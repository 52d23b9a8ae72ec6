"""Does the witness's early load slow the job it hides in? A GPU probe, one submission, three ways.

Since the witness process loads the submission during the test stage (bb5909a),
paged_decode_attention's jobs spent 27 s in their test stage and 30-34 s in their ranked stage on
the H200, against 4-6 s before (its baseline and its example; every other job kept its stage
times), and the baseline's profiled spans ran 27-58% longer than its CUDA events on 4 of 9 shapes
(score 0.404, 0.508 before). benchmarks/results/witness.md#thread-pool has what this probe found:
the judge's per-core torch pool, not the early load.

This runs the submission straight through ``python -m evaluator run --mode ranked`` (no runner
jail), the modes of ``MODES`` in turn: the early load as shipped (the judge's torch on one CPU
thread), the same with the judge on torch's per-core pool as bb5909a and 3482640 had it (the suspected
mechanism: a busy witness process or ncu taking a core from that pool), and the load after the
ranked stage as before bb5909a. Meanwhile it
samples the GPU (NVML: utilisation, memory, SM clock, per-process memory) and every
process's CPU time (``/proc``). Per run it writes the phases, each ranked shape's timing line (as
the runner rounds record it) and, per stage, the GPU's mean utilisation and peak memory and the
CPU seconds of the judge, the timing child, the witness process, ncu and everything else.

    python3 benchmarks/early_load_probe.py paged_decode_attention --runs 1 --out $OUT/early_load.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: witness_round beside it

from witness_round import witness_line

from evaluator.harness.timing.telemetry import Nvml

REPO = Path(__file__).resolve().parent.parent

#: The stages of a ranked job in the order the judge enters them (``phase_seconds`` keys without a dot
#: are sequential; the witness's sub-phases are inside ``witness``).
STAGES = ("judge_start", "start_up", "baseline", "compile", "test", "witness.load_wait", "ranked", "witness")
#: How each mode starts the judge's process: ``early`` as shipped (the early load, and since 19cad5e
#: the judge's torch on one CPU thread on every device); ``late`` with the witness process
#: loaded after the ranked stage, as before bb5909a; ``early_pool`` as shipped but with the judge on
#: torch's default pool, one thread per core, as before 19cad5e (``evaluator/harness/device.py``'s
#: ``single_threaded_host_work`` says why one thread; this mode shows whether that was the cause).
MODES = {
    "early": ["-m", "evaluator"],
    "late": [
        "-c",
        (
            "import sys; import evaluator.harness.witness.session as w; w.begin_load = lambda judge: None; "
            "from evaluator.cli import main; sys.exit(main())"
        ),
    ],
    # Patched before evaluator.harness.single.judge imports it by name (device.py imports no torch).
    "early_pool": [
        "-c",
        (
            "import sys; import evaluator.harness.device as d; d.single_threaded_host_work = lambda: None; "
            "from evaluator.cli import main; sys.exit(main())"
        ),
    ],
}
LATE_LOAD = MODES["late"][1]
TICK_S = 0.25
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def label_of(cmdline: str) -> str:
    """Which part of the job a process is (by its command line: the probe owns this machine). ncu's
    command line ends with the witness process's, so ncu is told by its first two words (on the H200
    ``ncu`` is a shell script whose child is the profiler)."""
    head = [Path(word).name for word in cmdline.split()[:2]]
    if any(word in ("ncu", "ncu-cli") for word in head):
        return "ncu"
    if "witness.profiled_child" in cmdline:
        return "witness"
    if "evaluator.harness.single.child" in cmdline:
        return "child"
    if "evaluator" in cmdline and " run " in f" {cmdline} ":
        return "judge"
    return "other"


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process's (label, user+system CPU seconds) now."""
    found: dict[int, tuple[str, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        found[int(entry.name)] = (label_of(cmdline), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return found


class Sampler:
    """CPU seconds by label and the GPU's state, every TICK_S, on a thread, until stopped."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.gpu = Gpu()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self.began = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)

    def _run(self) -> None:
        before = cpu_seconds()
        while not self.stop.wait(TICK_S):
            now = cpu_seconds()
            used: dict[str, float] = {}
            for pid, (label, seconds) in now.items():
                previous = before.get(pid, (label, 0.0))[1] if pid in before else 0.0
                used[label] = used.get(label, 0.0) + max(0.0, seconds - previous)
            before = now
            self.samples.append(
                {"t": round(time.monotonic() - self.began, 3), "cpu_s": used, **self.gpu.state()}
            )


class Gpu(Nvml):
    """GPU 0's state through NVML in this process (the harness's best-effort reader): no nvidia-smi
    process per sample, whose start-up would itself take CPU from the job (the suspected mechanism
    is exactly that)."""

    def state(self) -> dict[str, Any]:
        if self.handle is None:  # no NVML (the CPU smoke test): no GPU columns
            return {}
        utilisation, memory = (
            self._read("nvmlDeviceGetUtilizationRates"),
            self._read("nvmlDeviceGetMemoryInfo"),
        )
        clock = self._read("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM)
        if utilisation is None or memory is None or clock is None:
            return {}  # a failed sample is a missing sample
        apps = self._read("nvmlDeviceGetComputeRunningProcesses") or []
        return {
            "gpu_util": float(utilisation.gpu),
            "gpu_mem_mib": memory.used / 2**20,
            "sm_mhz": float(clock),
            "apps": [f"{app.pid}, {(app.usedGpuMemory or 0) // 2**20}" for app in apps],
        }


def stage_windows(phases: dict[str, float], started_at: float) -> dict[str, tuple[float, float]]:
    """Each stage's (start, end) on the sampler's clock, from the report's sequential phase seconds."""
    windows, at = {}, started_at
    for stage in STAGES:
        if stage in phases:
            windows[stage] = (at, at + phases[stage])
            at += phases[stage]
    return windows


def per_stage(samples: list[dict[str, Any]], windows: dict[str, tuple[float, float]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for stage, (begin, end) in windows.items():
        inside = [sample for sample in samples if begin <= sample["t"] < end]
        if not inside:
            continue
        cpu: dict[str, float] = {}
        for sample in inside:
            for label, seconds in sample["cpu_s"].items():
                cpu[label] = round(cpu.get(label, 0.0) + seconds, 2)
        utils = [sample["gpu_util"] for sample in inside if "gpu_util" in sample]
        summary[stage] = {
            "seconds": round(end - begin, 2),
            "cpu_s": cpu,
            "gpu_util_mean": round(sum(utils) / len(utils), 1) if utils else None,
            "gpu_mem_max_mib": max(
                (sample["gpu_mem_mib"] for sample in inside if "gpu_mem_mib" in sample), default=None
            ),
            "sm_mhz_min": min((sample["sm_mhz"] for sample in inside if "sm_mhz" in sample), default=None),
            "apps_at_peak": max(inside, key=lambda sample: sample.get("gpu_mem_mib", 0.0)).get("apps"),
        }
    return summary


def report_in(stdout: str) -> dict[str, Any] | None:
    """The report ``run --json`` printed: the first JSON object that starts a line (a library's
    warning on stdout before or after it does not lose the run)."""
    decoder = json.JSONDecoder()
    for start in [0] + [index + 1 for index, char in enumerate(stdout) if char == "\n"]:
        if stdout.startswith("{", start):
            try:
                found, _ = decoder.raw_decode(stdout, start)
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict) and "phase_seconds" in found:
                return found
    return None


def run_once(problem: str, source: Path, mode: str, device: str, timeout_s: float) -> dict[str, Any]:
    command = [sys.executable, *MODES[mode],
               "run", problem, str(source), "--device", device, "--mode", "ranked", "--json"]
    with Sampler() as sampler:
        began = time.monotonic()
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=REPO, timeout=timeout_s, check=False
        )
        ended = time.monotonic() - sampler.began
        seconds = time.monotonic() - began
    report = report_in(done.stdout)
    if report is None:
        return {"mode": mode, "rc": done.returncode, "seconds": round(seconds, 1),
                "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    phases = report.get("phase_seconds") or {}
    # The report's wall_seconds run from evaluate()'s start to the report, which the process prints
    # and exits right after: counted back from the exit, the stages land within a fraction of a
    # second (the interpreter's start and the modes' own imports come before evaluate()).
    started_at = ended - float(report.get("wall_seconds") or 0.0)
    shapes = [witness_line(shape) for shape in report.get("shapes", []) if shape.get("ranked")]
    return {
        "mode": mode, "rc": done.returncode, "seconds": round(seconds, 1), "status": report.get("status"),
        "problem_score": report.get("problem_score"), "flags": report.get("flags"), "phases": phases,
        "stages": per_stage(sampler.samples, stage_windows(phases, started_at)), "shapes": shapes,
        "samples": sampler.samples,
    }


def torch_threads() -> int | None:
    """torch's default intra-op pool on this machine (the judge's on the GPU path)."""
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                          check=False, capture_output=True, text=True, timeout=120)
    return int(done.stdout) if done.stdout.strip().isdigit() else None


def submission_file(problem: str, which: str, folder: Path) -> Path:
    if which == "example":
        return REPO / "examples" / "python" / f"{problem}.py"
    path = folder / f"{problem}_baseline.py"
    path.write_text(f"from evaluator.problems.{problem}.reference import baseline as kernel\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("--submission", choices=["baseline", "example"], default="baseline")
    parser.add_argument(
        "--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a smoke test of the probe"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs of each mode, the modes in turn")
    parser.add_argument(
        "--modes", default="early,early_pool,late", help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no run after this many seconds")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    began = time.monotonic()
    record: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              "commit": os.environ.get("SOLBOARD_COMMIT", "unknown"), "problem": args.problem,
                              "submission": args.submission, "cpus": os.cpu_count(),
                              "torch_threads": torch_threads(), "runs": []}
    with tempfile.TemporaryDirectory() as folder:
        source = submission_file(args.problem, args.submission, Path(folder))
        modes = args.modes.split(",")
        for index in range(len(modes) * args.runs):
            if time.monotonic() - began > args.budget_s:
                break
            mode = modes[index % len(modes)]
            result = run_once(args.problem, source, mode, args.device, timeout_s=300)
            record["runs"].append(result)
            args.out.write_text(json.dumps(record, indent=1))
            stages = result.get("stages", {})
            print(
                json.dumps(
                    {
                        "mode": mode,
                        "seconds": result["seconds"],
                        "status": result.get("status"),
                        "score": result.get("problem_score"),
                        "test": stages.get("test"),
                        "ranked": stages.get("ranked"),
                        "span_over_events": [
                            line.get("disagreement_rel") for line in result.get("shapes", [])
                        ],
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
