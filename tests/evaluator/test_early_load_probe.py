"""benchmarks/early_load_probe.py: the early witness load against the late one, per stage (issue 9)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "early_load_probe.py"


def script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("early_load_probe", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_process_of_a_job_is_told_apart_by_its_command_line() -> None:
    label = script().label_of
    assert label("/usr/bin/python3 -m evaluator run paged_decode_attention f.py --device cuda") == "judge"
    assert label(f"/usr/bin/python3 -c {script().LATE_LOAD} run paged_decode_attention f.py") == "judge"
    assert label("/usr/bin/python3 -m evaluator.harness.single.child --in-fd 5 --out-fd 8") == "child"
    witness = "python3 -m evaluator.harness.witness.profiled_child"
    assert label(f"/usr/bin/{witness} --socket s --log l") == "witness"
    # ncu's command line ends with the witness process's: its first words decide.
    assert label(f"/bin/sh /opt/nsight-compute/ncu --csv {witness}") == "ncu"
    assert (
        label("/opt/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/ncu-cli --csv python3 -m x") == "ncu"
    )
    assert label("/usr/sbin/sshd -D") == "other"


def test_stages_are_laid_end_to_end_and_samples_summed_inside_each() -> None:
    probe = script()
    phases = {"judge_start": 1.0, "start_up": 2.0, "baseline": 1.0, "compile": 0.5, "test": 3.0,
              "witness.load_wait": 0.5, "ranked": 2.0, "witness.calls": 1.5, "witness": 2.0}
    windows = probe.stage_windows(phases, started_at=0.25)
    assert windows["test"] == (4.75, 7.75)
    assert windows["witness.load_wait"] == (7.75, 8.25)
    assert windows["witness"] == (10.25, 12.25)
    assert "witness.calls" not in windows  # a sub-phase of the witness, not a stage of its own
    samples = [
        {
            "t": 5.0,
            "cpu_s": {"judge": 0.1, "witness": 0.2},
            "gpu_util": 50.0,
            "gpu_mem_mib": 900.0,
            "sm_mhz": 1980.0,
            "apps": ["1, 500"],
        },
        {
            "t": 7.5,
            "cpu_s": {"judge": 0.3},
            "gpu_util": 100.0,
            "gpu_mem_mib": 4000.0,
            "sm_mhz": 1755.0,
            "apps": ["1, 500", "2, 3000"],
        },
        {"t": 9.0, "cpu_s": {"child": 0.25}},  # ranked: no GPU reading (an NVML sample failed)
    ]
    summary = probe.per_stage(samples, windows)
    assert summary["test"]["cpu_s"] == {"judge": 0.4, "witness": 0.2}
    assert summary["test"]["gpu_util_mean"] == 75.0
    assert summary["test"]["gpu_mem_max_mib"] == 4000.0 and summary["test"]["sm_mhz_min"] == 1755.0
    assert summary["test"]["apps_at_peak"] == ["1, 500", "2, 3000"]
    assert summary["ranked"]["gpu_util_mean"] is None and summary["ranked"]["gpu_mem_max_mib"] is None
    assert "baseline" not in summary  # no sample fell inside it


def test_a_cpu_smoke_run_takes_each_mode_in_turn_and_records_each_stage(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "vector_add", "--device", "cpu", "--runs", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=240,
        check=False,
        env={**os.environ, "SOLBOARD_COMMIT": "test"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert [run["mode"] for run in record["runs"]] == ["early", "early_pool", "late"]
    assert record["cpus"] and record["torch_threads"]
    for run in record["runs"]:
        assert run["status"] == "PASSED" and run["rc"] == 0
        assert run["stages"]["start_up"]["cpu_s"].get("child", 0.0) > 0.0  # the timing child imported torch
        assert {"test", "ranked"} <= set(run["phases"])
        assert run["samples"]


def test_the_report_is_found_among_other_lines_on_stdout() -> None:
    report_in = script().report_in
    report = {"status": "PASSED", "phase_seconds": {"test": 1.0}, "shapes": []}
    printed = json.dumps(report, indent=2)
    assert report_in(printed) == report
    assert report_in(f"UserWarning: something\n{{not json\n{printed}\ntrailing line\n") == report
    assert report_in('{"type": "provisional"}\nerror: no report\n') is None
