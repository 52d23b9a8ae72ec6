"""torch.compile submissions pass on the CPU development device, and what torch.compile's import
changes is no excuse for a submission's own patches or threads (issue 33, item 7)."""

from __future__ import annotations

import subprocess
import sys

from tests.harness_helpers import GOOD, REPO, evaluate_file


def test_an_honest_torch_compile_kernel_passes_with_its_compilation_outside_the_timed_calls() -> None:
    report = evaluate_file(
        "vector_add", GOOD / "torch_compile_add.py", "--device", "cpu", "--shapes", "quick"
    )
    assert report["status"] == "PASSED", report["message"]
    for shape in report["shapes"]:
        assert shape["timing"]["method"] == "wall"
        # Compiling takes seconds (11 s here for the first shape); no timed call holds any of it.
        assert shape["timing"]["max_us"] < 1e6
        assert shape["wall_seconds"] > shape["timing"]["max_us"] * 1e-6


def test_importing_dynamo_after_the_childs_warm_up_changes_nothing_the_snapshot_watches() -> None:
    """A torch whose dynamo patches something else at import fails here, not in a user's job."""
    script = (
        "import torch\n"
        "from evaluator.harness import anticheat\n"
        "anticheat.install_what_torch_compile_installs()\n"
        "snapshot = anticheat.standard_integrity([])\n"
        "import torch._dynamo, torch._inductor.config\n"
        "print(snapshot.changed())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
