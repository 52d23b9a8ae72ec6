"""The stage script both judges follow (evaluator/harness/stages.py), run for real on the CPU device:
the single judge against one child, the multi-GPU judge against two gloo ranks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evaluator.vocabulary import RANKED, TEST, Stage, Status
from tests.harness_helpers import REPO, evaluate_file

CPU = ("--device", "cpu")
JOBS = {
    "single": ("vector_add", REPO / "examples" / "python" / "vector_add.py", ()),
    "multi": ("allreduce", REPO / "examples" / "python" / "allreduce.py", ("--world-size", "2")),
}


def _stages(report: dict[str, object]) -> list[str]:
    """The report's phases that are stages, in the order the judge entered them (the report also
    times the judge's own start and the parts of the child's start-up)."""
    phases = report["phase_seconds"]
    assert isinstance(phases, dict)
    return [name for name in phases if name in set(Stage)]


@pytest.mark.parametrize("judge", sorted(JOBS))
def test_both_judges_go_through_the_stages_in_one_order(judge: str) -> None:
    problem, path, extra = JOBS[judge]
    report = evaluate_file(problem, path, *CPU, "--mode", "ranked", *extra)
    assert report["status"] == Status.PASSED, report.get("message")
    assert _stages(report) == [stage.value for stage in Stage]
    assert all(shape["timing"] and shape["baseline_timing"] for shape in report["shapes"])


@pytest.mark.parametrize("judge", sorted(JOBS))
def test_a_failed_import_ends_the_script_at_compile_with_the_baseline_already_timed(
    judge: str, tmp_path: Path
) -> None:
    problem, _, extra = JOBS[judge]
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_anywhere\n\n\ndef kernel(*args):\n    pass\n")
    report = evaluate_file(problem, broken, *CPU, *extra)
    assert report["status"] == Status.COMPILE_ERROR
    assert "no_such_module_anywhere" in report["message"]
    assert _stages(report) == [Stage.START_UP, Stage.BASELINE, Stage.COMPILE]


def test_a_ranked_run_folds_its_secret_into_every_public_seed_and_shows_none() -> None:
    from evaluator.harness.stages import trial_label, trial_seeds

    ranked = SimpleNamespace(mode=RANKED, secret_seed=1234)
    seeds = trial_seeds(ranked, [1, 2], "n1024")  # type: ignore[arg-type]
    assert [public for _, public in seeds] == [None, None]
    assert len({seed for seed, _ in seeds} - {1, 2}) == 2
    assert seeds == trial_seeds(ranked, [1, 2], "n1024")  # type: ignore[arg-type]
    assert seeds != trial_seeds(ranked, [1, 2], "n2048")  # type: ignore[arg-type]
    assert trial_label(None, "normal") == "secret seed / normal"
    shown = trial_seeds(SimpleNamespace(mode=TEST, secret_seed=None), [1, 2], "n1024")  # type: ignore[arg-type]
    assert shown == [(1, 1), (2, 2)] and trial_label(1, "normal") == "seed 1 / normal"


def test_a_child_can_only_report_a_failing_status_against_itself() -> None:
    from evaluator.harness.stages import self_reported

    assert self_reported("INCORRECT_DTYPE") == Status.INCORRECT_DTYPE
    assert self_reported(Status.PASSED) == Status.REJECTED
    assert self_reported({"not": "a status"}) == Status.REJECTED
