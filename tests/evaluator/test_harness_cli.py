"""The `run` and `schema` commands end to end on the CPU development device: honest, slow, wrong,
crashing, hanging and malformed submissions get the right status; exit codes say who failed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.harness_helpers import GOOD, REPO, evaluate_file, run_cli

CPU = ("--device", "cpu")


def test_the_example_submission_passes_on_the_cpu_development_device() -> None:
    report = evaluate_file("vector_add", REPO / "examples/python/vector_add.py", *CPU)
    assert report["status"] == "PASSED"
    assert report["device"]["development_device"] is True
    for shape in report["shapes"]:
        assert shape["timing"]["method"] == "wall"
        assert shape["sol"] is None
        trials, timed = shape["checks"][:-1], shape["checks"][-1]
        assert len(trials) == 12  # 4 public seeds x 3 distributions
        assert trials[0]["errors"]["c"]["matched_ratio"] == 1.0
        assert "timed calls checked by the judge" in timed["trial"] and timed["passed"]


def test_the_cpu_device_is_never_rank_eligible() -> None:
    report = evaluate_file("vector_add", GOOD / "baseline.py", *CPU, "--mode", "ranked")
    assert report["status"] == "PASSED"
    assert report["rank_eligible"] is False
    assert report["problem_score"] is None


@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        ("wrong", "INCORRECT_NUMERICAL", "outside tolerance"),
        ("raises", "RUNTIME_ERROR", "boom"),
        ("syntax_error.txt", "COMPILE_ERROR", "SyntaxError"),
        ("no_kernel", "COMPILE_ERROR", "kernel"),
        ("changes_dtype", "INCORRECT_DTYPE", "float64"),
        ("changes_shape", "INCORRECT_SHAPE", "shape"),
    ],
)
def test_a_faulty_submission_gets_the_status_that_says_what_went_wrong(
    name: str, status: str, words: str
) -> None:
    path = GOOD / (name if name.endswith(".txt") else f"{name}.py")
    report = evaluate_file("vector_add", path, *CPU)
    assert report["status"] == status
    assert words in report["message"]
    for shape in report["shapes"]:
        assert shape["timing"] is None


def test_a_hanging_submission_times_out_and_leaves_no_process_behind() -> None:
    started = time.monotonic()
    report = evaluate_file("vector_add", GOOD / "hangs.py", *CPU, "--time-limit-test", "4")
    assert time.monotonic() - started < 30
    assert report["status"] == "TIMEOUT"
    assert "stage test" in report["message"]
    time.sleep(0.5)
    assert not _processes_with("solboard-hang-marker")


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_the_submission_output_is_captured_and_capped(tmp_path: Path) -> None:
    chatty = tmp_path / "chatty.py"
    chatty.write_text(
        "import torch\nprint('x' * 100000)\n\ndef kernel(a, b, c):\n    torch.add(a, b, out=c)\n"
    )
    report = evaluate_file("vector_add", chatty, *CPU, "--log-bytes", "1000")
    assert report["status"] == "PASSED"
    assert 0 < len(report["log"]) < 1200
    assert "bytes cut" in report["log"]


def test_an_unknown_problem_is_the_evaluators_error_not_a_verdict() -> None:
    result = run_cli("run", "no_such_problem", str(GOOD / "baseline.py"), *CPU)
    assert result.returncode == 2
    assert "unknown problem" in result.stderr


def test_a_missing_file_is_the_evaluators_error() -> None:
    result = run_cli("run", "vector_add", "/nonexistent/kernel.py", *CPU)
    assert result.returncode == 2


def test_the_language_follows_the_extension_and_ptx_needs_a_gpu(tmp_path: Path) -> None:
    source = tmp_path / "k.ptx"
    source.write_text("this is not ptx")
    result = run_cli("run", "vector_add", str(source), *CPU)  # no --language: .ptx is PTX, not Python
    assert result.returncode == 2
    assert "ptx submissions need a GPU" in result.stderr
    renamed = tmp_path / "kernel.txt"  # any other extension is Python
    renamed.write_text((GOOD / "baseline.py").read_text())
    assert evaluate_file("vector_add", renamed, *CPU)["status"] == "PASSED"


def test_the_human_summary_names_the_status_of_every_shape() -> None:
    result = run_cli("run", "vector_add", str(GOOD / "wrong.py"), *CPU)
    assert result.returncode == 0
    assert "INCORRECT_NUMERICAL" in result.stdout
    assert "n4099" in result.stdout


def test_the_schema_command_prints_the_published_schema() -> None:
    result = run_cli("schema")
    assert result.returncode == 0
    printed = json.loads(result.stdout)
    assert printed["title"] == "EvaluationReport"
    published = json.loads((REPO / "docs" / "report-schema.json").read_text())
    assert printed == published


def test_calibrate_says_it_needs_a_gpu_where_there_is_none() -> None:
    from tests.harness_helpers import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU; tests/evaluator/test_harness_gpu.py covers calibrate there")
    result = run_cli("calibrate", "--json")
    assert result.returncode == 2
    assert "needs a CUDA GPU" in result.stderr


def test_a_submission_that_sabotages_the_result_channel_is_its_own_runtime_error(tmp_path: Path) -> None:
    saboteur = tmp_path / "saboteur.py"
    saboteur.write_text(
        "import os\nimport torch\n\n"
        "def kernel(a, b, c):\n"
        "    args = open('/proc/self/cmdline', 'rb').read().decode().split('\\0')\n"
        "    os.close(int(args[args.index('--out-fd') + 1]))\n"
        "    torch.add(a, b, out=c)\n"
    )
    report = evaluate_file("vector_add", saboteur, *CPU)
    assert report["status"] in ("RUNTIME_ERROR", "REJECTED")
    assert report["status"] != "PASSED"
