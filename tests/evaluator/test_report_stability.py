"""The report a CPU run produces keeps its form: every key in its place and order, every status,
check and message as it was (numbers masked: timings vary from run to run, the words do not).

The golden skeletons in tests/fixtures/reports/ were written from the reports of the evaluator as
it was before the judge's shape results became typed (``harness.outcome.ShapeResult``): the JSON
runners send and the site stores must not change with the harness's internals. A deliberate change
of the report regenerates them: ``SOLBOARD_WRITE_GOLDEN=1 pytest tests/evaluator/test_report_stability.py``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from tests.harness_helpers import CHEATS, FIXTURES, GOOD, REPO, evaluate_file

GOLDEN = FIXTURES / "reports"
CPU = ("--device", "cpu", "--seed", "5")
RANKED = ("--mode", "ranked", "--secret-seed-stdin")

#: Values that differ between machines or between runs of the same honest kernel: shown by type.
MACHINE_OR_RUN = {
    "name",
    "torch_version",
    "log",
    "started_at",
    "finished_at",
    "sandbox",
    "raised",
    "notes",
    "flags",
}

CASES: dict[str, tuple[str, Any, tuple[str, ...]]] = {
    "passed_ranked": ("vector_add", GOOD / "baseline.py", RANKED),
    "incorrect_numerical": ("vector_add", GOOD / "wrong.py", ()),
    "rejected_input_modified": ("vector_add", CHEATS / "c07_zero_inputs.py", ()),
    "timeout_while_timed": ("vector_add", GOOD / "hangs_when_timed.py", ()),
    "multi_gpu_ranked": ("allreduce", REPO / "examples" / "python" / "allreduce.py", RANKED),
}


def masked(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", text.replace(str(REPO), "<repo>"))


def skeleton(value: Any, key: str = "") -> Any:
    """The report with its numbers replaced by their type, its strings' numbers by '#', and the
    values of MACHINE_OR_RUN by their type; keys keep their order (a list of pairs)."""
    if key in MACHINE_OR_RUN:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return [[name, skeleton(item, name)] for name, item in value.items()]
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return f"<{type(value).__name__}>"
    return masked(str(value))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_cpu_runs_report_keeps_its_form(case: str) -> None:
    problem, submission, extra = CASES[case]
    report = evaluate_file(problem, submission, *CPU, *extra, stdin="1234\n")
    got = skeleton(report)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("SOLBOARD_WRITE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())


def test_the_skeleton_sees_a_renamed_key_a_moved_key_and_a_changed_word() -> None:
    report = {"status": "PASSED", "shapes": [{"shape_id": "n4099", "timing": {"median_us": 4.2, "n": 30}}]}
    assert skeleton(report) == [
        ["status", "PASSED"],
        ["shapes", [[["shape_id", "n#"], ["timing", [["median_us", "<float>"], ["n", "<int>"]]]]]],
    ]
    assert skeleton({**report, "status": "passed"}) != skeleton(report)
    assert skeleton({"shapes": report["shapes"], "status": "PASSED"}) != skeleton(report)
    assert skeleton({**report, "shapes": [{"shape_id": "n4099", "timing": {"median_us": 4, "n": 30}}]}) \
        != skeleton(report)
