"""Small problems written here in each source format, for the importer's tests: a SOL-ExecBench
definition folder and a GPU MODE reference-kernels task folder, built from a few arguments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from evaluator.problems import IMPORTED_DIR_ENV
from tests.harness_helpers import REPO

RK_UTILS = (
    REPO / "tests" / "fixtures" / "import" / "reference-kernels" / "problems" / "pmpp_like" / "utils.py"
)

TASK_PY = '''from typing import TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple)
output_t = TypeVar("output_t", bound=torch.Tensor)
'''


def sxb_definition(folder: Path, *, name: str, axes: dict[str, Any], inputs: dict[str, Any],
                   outputs: dict[str, Any], reference: str, workloads: list[dict[str, Any]],
                   inline: bool = True, **extra: Any) -> Path:
    """A SOL-ExecBench problem folder; the reference inline in definition.json or in reference.py."""
    folder.mkdir(parents=True, exist_ok=True)
    source = textwrap.dedent(reference).strip() + "\n"
    definition = {"name": name, "axes": axes, "inputs": inputs, "outputs": outputs, **extra}
    if inline:
        definition["reference"] = source
    else:
        (folder / "reference.py").write_text(source)
    (folder / "definition.json").write_text(json.dumps(definition, indent=2))
    (folder / "workload.jsonl").write_text("".join(json.dumps(item) + "\n" for item in workloads))
    return folder


def workload(uuid: str, axes: dict[str, int], inputs: dict[str, Any] | None = None,
             tolerance: dict[str, float] | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"uuid": uuid, "axes": axes, "inputs": inputs or {}}
    if tolerance is not None:
        item["tolerance"] = tolerance
    return item


def rk_task(set_folder: Path, task: str, *, reference: str, tests: list[dict[str, Any]],
            benchmarks: list[dict[str, Any]] | None = None) -> Path:
    """A reference-kernels task folder ``set_folder/task`` with the set's utils.py."""
    folder = set_folder / task
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(RK_UTILS, set_folder / "utils.py")
    (folder / "reference.py").write_text(textwrap.dedent(reference).strip() + "\n")
    (folder / "task.py").write_text(TASK_PY)
    lines = [
        "files:",
        '  - {"name": "submission.py", "source": "@SUBMISSION@"}',
        '  - {"name": "task.py", "source": "task.py"}',
        '  - {"name": "utils.py", "source": "../utils.py"}',
        '  - {"name": "reference.py", "source": "reference.py"}',
        'lang: "py"',
        f"description: {task}",
        "tests:",
    ]
    lines += [f"  - {json.dumps(spec)}" for spec in tests]
    if benchmarks:
        lines += ["benchmarks:"] + [f"  - {json.dumps(spec)}" for spec in benchmarks]
    (folder / "task.yml").write_text("\n".join(lines) + "\n")
    return folder


def run_module(module: str, *args: str, imported: Path) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` from the repository, with ``imported`` as the imported problems' folder."""
    env = {**os.environ, IMPORTED_DIR_ENV: str(imported)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def run_harness(problem: str, submission: Path, imported: Path) -> dict[str, Any]:
    """The CPU harness's report of ``submission`` on an imported problem (``evaluator run``)."""
    result = run_module("evaluator", "run", problem, str(submission), "--device", "cpu", "--json",
                        imported=imported)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)
