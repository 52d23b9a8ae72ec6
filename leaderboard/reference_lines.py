"""Reference lines on the site: submitted through the normal path, labelled, never ranked.

Write side (``measure_references``, the management command of that name): for each problem, GPU
type and line of ``evaluator.references.reference_specs``, the line's source is submitted in ranked
mode by the system user ``REFERENCE_USER`` through ``check_submission``/``save_submission`` (the
same checks, queues and runners as anyone's), and a ``ReferenceLine`` row labels the result. It is
idempotent per problem version: a line already submitted with the same source is left alone
(``again`` re-submits the ones that failed). A line that needs a GPU is not submitted to the CPU
development device; its row says so.

Never ranked: every submission of ``REFERENCE_USER`` is a reference line
(``leaderboard.models.is_reference_submission``); ``leaderboard.ranking_maintenance.is_rank_eligible`` refuses
them and the problem page's provisional list leaves them out.

Read side (``line_rows``): each line of a problem version on a GPU type with its status, the
version of the library it measured (printed by the reference when it loaded), and its figures per
shape as the site judged them (time, speedup over the baseline, S), for the problem page, the
API and the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from evaluator.problems import CatalogueError, get_problem
from evaluator.references import ReferenceSpec, measured_versions, reference_specs
from evaluator.scoring import geometric_mean, problem_score
from evaluator.vocabulary import Status
from leaderboard.models import REFERENCE_USER, EvaluationStatus, GpuType, Problem, ReferenceLine, ShapeResult
from leaderboard.submissions import check_submission, save_submission

S = EvaluationStatus
#: Statuses ``again`` submits anew.
RETRIED = ("failed", "unavailable")


class NotTheSystemAccount(RuntimeError):
    """An account named REFERENCE_USER exists that a person can use: lines are not submitted as it."""


def reference_user() -> Any:
    """The system account (created inactive, without a usable password). An account of that name
    someone signed up with is refused: its owner would own the lines (and could cancel them)."""
    user, created = get_user_model().objects.get_or_create(
        username=REFERENCE_USER, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    elif user.is_active or user.has_usable_password():
        raise NotTheSystemAccount(
            f"the account {REFERENCE_USER!r} exists and can log in: it is not the system "
            "account reference lines are submitted as (rename it, then run again)"
        )
    return user


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Measured:
    """What ``measure_references`` did with one line (a line of its report)."""

    problem: str
    gpu_type: str
    label: str
    outcome: str  # submitted, unchanged, needs a GPU runner, refused

    def line(self) -> str:
        return f"{self.problem:<24} {self.gpu_type:<6} {self.label:<14} {self.outcome}"


def measure_references(problems: Iterable[Problem], gpus: Iterable[GpuType], labels: Iterable[str] = (),
                       again: bool = False) -> list[Measured]:
    """Submit every line not yet measured for the problems' current versions on these GPU types."""
    user = reference_user()
    wanted = set(labels)
    done = []
    gpu_types = list(gpus)
    for problem in problems:
        for spec in _specs(problem):
            if wanted and spec.label not in wanted:
                continue
            done += [_measure(user, problem, gpu, spec, again) for gpu in gpu_types]
    return done


def _specs(problem: Problem) -> list[ReferenceSpec]:
    try:
        return reference_specs(get_problem(problem.name))
    except CatalogueError:
        return []  # gone from the catalogue since the last sync


def _measure(user: Any, problem: Problem, gpu: GpuType, spec: ReferenceSpec, again: bool) -> Measured:
    def said(outcome: str) -> Measured:
        return Measured(problem.name, gpu.key, spec.label, outcome)

    line = ReferenceLine.objects.filter(problem=problem, problem_version=problem.version, gpu_type=gpu,
                                        label=spec.label).select_related("evaluation").first()
    if line is not None and line.source_sha256 == spec.source_sha256:
        status, text = line_status(line)
        if not (again and status in RETRIED):
            return said(f"unchanged ({text})")
    if spec.needs_gpu and gpu.development_device:
        _save_line(line, problem, gpu, spec, None)
        return said("needs a GPU runner (not submitted to the CPU development device)")
    try:
        checked = check_submission(user, problem.name, "python", spec.source, [gpu.key], "ranked")
    except ValidationError as error:
        return said(f"refused: {'; '.join(error.messages)}")
    with transaction.atomic():
        submission = save_submission(user, checked)
        type(submission).objects.filter(pk=submission.pk).update(
            public=True
        )  # its source is the repository's
        _save_line(line, problem, gpu, spec, submission)
    return said(f"submitted (submission {submission.pk})")


def _save_line(line: ReferenceLine | None, problem: Problem, gpu: GpuType, spec: ReferenceSpec,
               submission: Any) -> None:
    values = {"title": spec.title[:200], "kind": spec.kind, "source_path": spec.source_path,
              "source_sha256": spec.source_sha256, "package": spec.package, "url": spec.url,
              "state": ReferenceLine.State.SUBMITTED if submission else ReferenceLine.State.NEEDS_GPU,
              "submission": submission, "evaluation": submission.evaluations.get() if submission else None}
    if line is None:
        ReferenceLine.objects.create(problem=problem, problem_version=problem.version, gpu_type=gpu,
                                     label=spec.label, **values)
        return
    for name, value in values.items():
        setattr(line, name, value)
    line.save()


# ---------------------------------------------------------------- status


def line_status(line: ReferenceLine) -> tuple[str, str]:
    """(status, words): needs_gpu, measuring, measured, unavailable (the library is not installed
    on the runner that ran it) or failed."""
    if line.state == ReferenceLine.State.NEEDS_GPU:
        return "needs_gpu", "needs a GPU runner: this library has no CPU path"
    evaluation = line.evaluation
    if evaluation is None:
        return "failed", "its evaluation was deleted"
    if evaluation.status in (S.QUEUED, S.RUNNING):
        return "measuring", f"{evaluation.status} on a runner"
    if evaluation.status == S.PASSED:
        return "measured", "measured"
    message = evaluation.message or ""
    if line.package and f"No module named '{line.package.replace('-', '_')}" in message:
        return "unavailable", (f"{line.package} is not installed on the runner that ran it "
                               "(the runner's `references` extra: docs/references.md)")
    return "failed", f"{evaluation.status}: {message[:300]}"


# ---------------------------------------------------------------- reading


@dataclass(frozen=True)
class LineShape:
    shape_pk: int
    shape_id: str
    median_us: float | None
    speedup: float | None
    sol_fraction: float | None
    score: float | None


@dataclass
class LineRow:
    """One reference line as pages and the API show it."""

    label: str
    title: str
    kind: str
    status: str
    status_text: str
    package: str
    versions: dict[str, str]
    url: str
    source_path: str
    submission_id: int | None
    evaluation_id: int | None
    score: float | None = None
    speedup: float | None = None
    sol_fraction: float | None = None
    shapes: list[LineShape] = field(default_factory=list)

    def at(self, shape_pk: int) -> LineShape | None:
        return next((item for item in self.shapes if item.shape_pk == shape_pk), None)

    def body(self, shape_pk: int | None = None) -> dict[str, Any]:
        """The API's form (one shape's figures when ``shape_pk`` is given)."""
        shapes = [item for item in self.shapes if shape_pk is None or item.shape_pk == shape_pk]
        return {"label": self.label, "title": self.title, "kind": self.kind, "status": self.status,
                "status_text": self.status_text, "package": self.package or None, "versions": self.versions,
                "url": self.url or None, "source_path": self.source_path, "submission_id": self.submission_id,
                "evaluation_id": self.evaluation_id, "score": self.score, "speedup": self.speedup,
                "sol_fraction": self.sol_fraction, "ranked": False,
                "shapes": [{"shape": item.shape_id, "median_us": item.median_us, "speedup": item.speedup,
                            "sol_fraction": item.sol_fraction, "score": item.score} for item in shapes]}


def line_rows(problem: Problem, gpu: GpuType, version: int | None = None,
              score_shapes: Iterable[int] = ()) -> list[LineRow]:
    """The reference lines of this problem version on this GPU type, with their figures.

    ``score_shapes``: the shapes a score is made of here (the board's); the line's score is its
    evaluation's when the site stored one, else the problem score of those shapes' S."""
    lines = list(ReferenceLine.objects.filter(problem=problem, problem_version=version or problem.version,
                                              gpu_type=gpu).select_related("evaluation").order_by("id"))
    figures = _figures(line.evaluation_id for line in lines if line.evaluation_id)
    wanted = set(score_shapes)
    return [_row(line, figures.get(line.evaluation_id or 0, []), wanted) for line in lines]


def _figures(evaluation_ids: Iterable[int]) -> dict[int, list[LineShape]]:
    ids = list(evaluation_ids)
    if not ids:
        return {}
    rows = (
        ShapeResult.objects.filter(evaluation_id__in=ids, status=Status.PASSED)
        .order_by("shape__position")
        .values_list(
            "evaluation_id", "shape_id", "shape__shape_id", "median_us", "speedup", "sol_fraction", "score"
        )
    )
    found: dict[int, list[LineShape]] = {}
    for evaluation_id, *values in rows:
        found.setdefault(evaluation_id, []).append(LineShape(*values))
    return found


def _row(line: ReferenceLine, shapes: list[LineShape], score_shapes: set[int]) -> LineRow:
    status, text = line_status(line)
    evaluation = line.evaluation
    counted = [item for item in shapes if item.shape_pk in score_shapes]
    scores = [item.score for item in counted if item.score is not None]
    score = evaluation.score if evaluation is not None and evaluation.score is not None else (
        problem_score(scores) if score_shapes and len(scores) == len(score_shapes) else None)
    return LineRow(
        label=line.label,
        title=line.title,
        kind=line.kind,
        status=status,
        status_text=text,
        package=line.package,
        versions=measured_versions(evaluation.log if evaluation is not None else ""),
        url=line.url,
        source_path=line.source_path,
        submission_id=line.submission_id,
        evaluation_id=line.evaluation_id,
        score=score if status == "measured" else None,
        speedup=_geomean([item.speedup for item in counted]),
        sol_fraction=_geomean([item.sol_fraction for item in counted]),
        shapes=shapes,
    )


def _geomean(values: list[float | None]) -> float | None:
    if not values or any(value is None or not value > 0 for value in values):
        return None
    return geometric_mean([value for value in values if value is not None])


def time_ratio(leader: dict[int, float], line: LineRow) -> float | None:
    """How the leader's times compare with the line's: the geometric mean over the shapes both
    measured of leader time / line time (1.07: the leader is 7% slower)."""
    ratios = [leader[item.shape_pk] / item.median_us for item in line.shapes
              if item.median_us and leader.get(item.shape_pk)]
    return geometric_mean(ratios) if ratios else None
