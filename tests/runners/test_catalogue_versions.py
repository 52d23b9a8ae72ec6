"""A runner evaluates a job only against the catalogue version the job names (docs/problems.md, Versions)."""

from __future__ import annotations

from runners.jobflow import catalogue_mismatch
from tests.runner_helpers import make_job


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
