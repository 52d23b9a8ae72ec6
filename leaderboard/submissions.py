"""``create_submission``: the one way a kernel enters the system (web form, API and CLI call it).

Validates at once (UTF-8 text without NUL, naming the offending byte's offset; size; language
accepted by the problem; Python that parses and defines a ``kernel`` (``python_uploads``); known GPU types;
PTX/CUDA assembled for the target of each GPU type, see ``native_uploads``; a SOL-ExecBench solution.json
read first, ``foreign_uploads``) in ``check_submission``,
outside any transaction and under the site's compile limits (``compile_limits``); then
``save_submission`` saves the Submission and one Evaluation per GPU type in one short transaction,
and hands the evaluations to the broker only after that transaction commits (nothing enqueued for
a submission that was not saved; the sweeper re-enqueues anything saved whose hand-over was lost).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from evaluator.ptx.sourcetext import decode_source, text_problem
from evaluator.vocabulary import NATIVE_LANGUAGES
from leaderboard.compile_limits import check_macro_bomb, compile_slot, site_tool_limits
from leaderboard.dispatch import enqueue_on_commit
from leaderboard.foreign_uploads import sort_upload
from leaderboard.models import Evaluation, GpuType, Language, Mode, Problem, Submission
from leaderboard.native_uploads import validate_native_upload
from leaderboard.python_uploads import entry_point_problem
from solboard_common.limits import source_too_large

MODES = tuple(Mode.values)


@dataclass(frozen=True)
class CheckedSubmission:
    """An upload that passed every check (its PTX/CUDA built for each target), not yet saved."""

    problem: Problem
    language: str
    source: str
    gpus: list[GpuType]
    mode: str
    launch_spec: str | None
    evidence: dict[str, Any]


def check_submission(
    user: Any, problem_name: str, language: str, source: str, gpu_types: Sequence[str], mode: str,
    launch_spec: str | None = None,
) -> CheckedSubmission:
    """Every check of a create, nothing saved; raises ValidationError (field -> message).

    PTX/CUDA are built here, under the site's compile limits (``compile_limits``): callers run this
    outside any database transaction, so a compile never holds a lock (on SQLite, the whole
    database) while nvcc works."""
    problem = _problem(problem_name)
    upload = sort_upload(problem, language, source, launch_spec)  # a SOL-ExecBench solution.json
    language, source, launch_spec = upload.language, upload.source, upload.launch_spec
    _check_language(problem, language)
    _check_source(language, source, upload.solution)
    gpus = _gpu_types(gpu_types)
    _check_devices(problem, gpus)
    if mode not in MODES:
        raise ValidationError({"mode": f"mode must be one of {', '.join(MODES)}"})
    evidence: dict[str, Any] = {}
    if language in NATIVE_LANGUAGES:  # last: the only check that runs tools (ptxas, nvcc)
        check_macro_bomb(source)
        with compile_slot(user.pk):
            evidence = validate_native_upload(
                problem, language, source, launch_spec, gpus, site_tool_limits()
            )
    return CheckedSubmission(problem, language, source, gpus, mode, launch_spec, evidence)


def save_submission(user: Any, checked: CheckedSubmission) -> Submission:
    """Save the Submission and one Evaluation per GPU type in one short transaction; enqueue after commit."""
    with transaction.atomic():
        submission = Submission.objects.create(
            user=user,
            problem=checked.problem,
            problem_version=checked.problem.version,
            language=checked.language,
            source=checked.source,
            launch_spec=checked.launch_spec,
            static_evidence=checked.evidence,
        )
        for gpu in checked.gpus:
            Evaluation.objects.create(submission=submission, gpu_type=gpu, mode=checked.mode)
        enqueue_on_commit(user.pk, [gpu.pk for gpu in checked.gpus])
    return submission


def create_submission(
    user: Any, problem_name: str, language: str, source: str, gpu_types: Sequence[str], mode: str,
    launch_spec: str | None = None,
) -> Submission:
    """Validate, save and enqueue; raises ValidationError (field -> message) on bad input."""
    checked = check_submission(user, problem_name, language, source, gpu_types, mode, launch_spec)
    return save_submission(user, checked)


def _problem(name: str) -> Problem:
    problem = Problem.objects.filter(name=name, active=True).first()
    if problem is None:
        raise ValidationError({"problem": f"no such problem: {name!r}"})
    return problem


def _check_language(problem: Problem, language: str) -> None:
    if language not in Language.values:
        raise ValidationError({"language": f"unknown language {language!r}"})
    if language not in problem.languages:
        accepted = ", ".join(problem.languages)
        raise ValidationError({"language": f"{problem.name} accepts {accepted}, not {language}"})


def source_from_upload(data: bytes) -> str:
    """An uploaded file's bytes as source text; a ValidationError names the first byte that is not
    UTF-8 (or a NUL) by its offset."""
    try:
        return decode_source(data)
    except ValueError as error:
        raise ValidationError({"source": str(error)}) from None


def _check_source(language: str, source: str, solution: bool = False) -> None:
    problem = text_problem(source)  # first: a lone surrogate would break every check below
    if problem is not None:
        raise ValidationError({"source": problem})
    size = len(source.encode("utf-8"))
    if size == 0:
        raise ValidationError({"source": "the source is empty"})
    if size > settings.SOLBOARD_MAX_SOURCE_BYTES:
        raise ValidationError({"source": source_too_large(size, settings.SOLBOARD_MAX_SOURCE_BYTES)})
    if language == Language.PYTHON:
        try:
            ast.parse(source, filename="submission.py")  # parsed only: never executed on the site
        except SyntaxError as error:
            raise ValidationError(
                {"source": f"Python does not parse: line {error.lineno}: {error.msg}"}
            ) from None
        missing = (
            None if solution else entry_point_problem(source)
        )  # no runner job for a file with nothing to call
        if missing:
            raise ValidationError({"source": missing})


def _check_devices(problem: Problem, gpus: list[GpuType]) -> None:
    """A problem with no shape for the CPU development device (an import whose every shape needs
    a GPU, docs/importing.md) takes GPU types only: the device would have nothing to run."""
    development = any(gpu.development_device for gpu in gpus)
    if development and not problem.shapes.filter(cpu=True, active=True).exists():
        raise ValidationError({"gpu_types": f"{problem.name} has no shape the CPU development device runs "
                                            "(every shape needs a GPU): name a GPU type"})


def _gpu_types(keys: Sequence[str]) -> list[GpuType]:
    if not keys:
        raise ValidationError({"gpu_types": "name at least one GPU type"})
    found = {gpu.key: gpu for gpu in GpuType.objects.filter(key__in=list(keys))}
    missing = [key for key in keys if key not in found]
    if missing:
        raise ValidationError({"gpu_types": f"unknown GPU type(s): {', '.join(missing)}"})
    return [found[key] for key in dict.fromkeys(keys)]
