"""A runner evaluates a job only against the catalogue version the job names (docs/problems.md, Versions)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluator.importers import import_problems
from evaluator.problems import IMPORTED_DIR_ENV, get_problem, load_catalogue
from runners.jobflow import catalogue_mismatch
from tests.runner_helpers import make_job

VECTORADD = (Path(__file__).resolve().parents[1] / "fixtures" / "import" / "reference-kernels" / "problems"
             / "pmpp_like" / "vectoradd_py")


def test_a_runner_refuses_a_job_for_another_catalogue_version_before_running_it() -> None:
    current = make_job(1, problem="softmax")
    assert catalogue_mismatch(current) == ""
    older = current.model_copy(update={"problem_version": current.problem_version - 1})
    assert catalogue_mismatch(older) == (
        f"this runner's catalogue has softmax v{current.problem_version}; "
        f"the job is for v{current.problem_version - 1}"
    )
    assert "no problem 'no_such_problem'" in catalogue_mismatch(
        current.model_copy(update={"problem": "no_such_problem"})
    )


def test_a_problem_imported_while_the_site_is_up_is_read_from_disk(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`import_problems` under `make run` writes the folder from another process: the runner and
    the site worker read their catalogues before, and must neither refuse a job for the new problem
    (the site bounced it back at once, forever) nor its report (REJECTED: unknown problem)."""
    staged, imported = tmp_path / "staged", tmp_path / "imported"
    imported.mkdir()
    (item,) = import_problems("reference-kernels", VECTORADD, staged).problems
    assert item.status == "converted" and item.name, item.reason
    monkeypatch.setenv(IMPORTED_DIR_ENV, str(imported))
    load_catalogue.cache_clear()
    try:
        assert item.name not in load_catalogue()  # the runner's copy, read before the import
        shutil.copytree(staged / item.name, imported / item.name)  # the other process's import
        job = make_job(1).model_copy(update={"problem": item.name, "problem_version": 1})
        assert catalogue_mismatch(job) == ""
        # The site worker that stores the report, and the web process, look it up by name too.
        shutil.rmtree(imported / item.name)
        load_catalogue.cache_clear()
        assert item.name not in load_catalogue()
        shutil.copytree(staged / item.name, imported / item.name)
        assert get_problem(item.name).name == item.name
        missing = job.model_copy(update={"problem": "still_missing"})
        assert "no problem 'still_missing'" in catalogue_mismatch(missing)
    finally:
        load_catalogue.cache_clear()
