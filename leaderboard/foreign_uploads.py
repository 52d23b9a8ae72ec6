"""SOL-ExecBench ``solution.json`` uploads, sorted on the site before any check runs.

A solution.json arrives as a Python upload (its extension says nothing else). For a problem imported
from SOL-ExecBench:

- a Python solution (pytorch, triton, cute_dsl, ...) is kept as it is: the sandboxed child writes
  its sources and calls its entry point (``evaluator/importers/foreign.py``); the site only skips
  the check for a module-level ``kernel``, which a JSON file cannot have;
- a CUDA C++ solution is a native kernel: where it maps onto the problem's native ABI it becomes a
  CUDA submission (its ``.cu`` source and launch spec), validated and built like any other;
  otherwise it is refused here with the reason (a PyTorch extension, no launch spec, ...).

For any other problem a solution.json is refused with what the problem takes instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from evaluator.importers.foreign import ForeignError, imported_format, native_solution, parse_solution
from evaluator.problems import CatalogueError, get_problem
from leaderboard.models import Language, Problem


@dataclass(frozen=True)
class Upload:
    """What to check and store: the language, source and launch spec after the solution is read."""

    language: str
    source: str
    launch_spec: str | None
    #: A Python solution.json: the runner's child reads it (no module-level ``kernel`` to look for).
    solution: bool = False


def sort_upload(problem: Problem, language: str, source: str, launch_spec: str | None) -> Upload:
    """The upload as it will be checked; ValidationError where a solution.json cannot be taken."""
    solution = parse_solution(source) if language == Language.PYTHON else None
    if solution is None:
        return Upload(language, source, launch_spec)
    try:
        catalogue = get_problem(problem.name)
    except CatalogueError:
        return Upload(language, source, launch_spec)  # the problem left the catalogue: checked as Python
    if imported_format(catalogue) != "sol-execbench":
        raise ValidationError(
            {
                "source": f"a SOL-ExecBench solution.json is taken only by problems imported from "
                f"SOL-ExecBench; {problem.name} takes {', '.join(problem.languages)} "
                "submissions (docs/problems.md, docs/ptx.md)"
            }
        )
    try:
        native = native_solution(solution, catalogue)
    except ForeignError as error:
        raise ValidationError({"source": str(error)}) from None
    if native is None:
        return Upload(language, source, launch_spec, solution=True)
    if launch_spec and native.launch_spec:
        raise ValidationError(
            {"launch_spec": "the solution.json carries its own launch spec: send one of the two"}
        )
    return Upload(native.language, native.source, launch_spec or native.launch_spec)
