"""sync_problems and sync_gpu_types mirror the evaluator's data files, idempotently and versioned."""

from __future__ import annotations

import dataclasses
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from evaluator.gpu_specs import load_gpu_specs
from evaluator.problems import load_catalogue
from leaderboard.models import Evaluation, GpuType, Problem, Shape, ShapeResult, Submission
from leaderboard.sync import sync_problems

pytestmark = pytest.mark.django_db


def run(command: str) -> str:
    out = StringIO()
    call_command(command, stdout=out, stderr=StringIO())
    return out.getvalue()


def snapshot() -> dict[str, Any]:
    return {
        "problems": sorted(Problem.objects.values_list("name", "version", "catalogue_sha256", "synced_at")),
        "shapes": sorted(Shape.objects.values_list("id", "problem__name", "shape_id", "position", "active")),
    }


def test_the_catalogue_has_at_least_one_problem() -> None:
    assert len(load_catalogue()) >= 1


def test_sync_problems_mirrors_every_problem_and_shape_of_the_catalogue() -> None:
    run("sync_problems")
    catalogue = load_catalogue()
    assert set(Problem.objects.values_list("name", flat=True)) == set(catalogue)
    for name, problem in catalogue.items():
        stored = Problem.objects.get(name=name)
        assert stored.version == problem.version and stored.world_size == problem.world_size
        assert list(stored.shapes.values_list("shape_id", flat=True)) == [s.shape_id for s in problem.shapes]
        first = stored.shapes.first()
        assert first.counts["bytes"] == problem.counts(first.axes).bytes


def test_sync_problems_twice_in_a_row_changes_nothing_the_second_time() -> None:
    first_output = run("sync_problems")
    before = snapshot()
    second_output = run("sync_problems")
    assert "problems changed" in first_output
    assert "problems unchanged" in second_output
    assert snapshot() == before


def test_a_new_version_updates_the_problem_and_keeps_shapes_that_have_results(
    alice: Any, gpu_types: Any
) -> None:
    sync_problems()
    name, problem = next(iter(load_catalogue().items()))
    kept_shape = Shape.objects.get(problem__name=name, shape_id=problem.shapes[0].shape_id)
    stored = kept_shape.problem
    submission = Submission.objects.create(user=alice, problem=stored, problem_version=stored.version,
                                           language="python", source="pass\n")
    evaluation = Evaluation.objects.create(submission=submission, gpu_type=gpu_types["h100"], mode="test")
    ShapeResult.objects.create(evaluation=evaluation, shape=kept_shape, status="PASSED", correct=True)
    # v+1 drops the shape that has a result: it must stay, marked inactive.
    newer = dataclasses.replace(
        problem, version=problem.version + 1, title="Renamed", shapes=problem.shapes[1:]
    )

    report = sync_problems({name: newer})

    assert report.updated == [name]
    stored.refresh_from_db()
    kept_shape.refresh_from_db()
    assert (stored.version, stored.title) == (problem.version + 1, "Renamed")
    assert not kept_shape.active
    assert stored.shapes.filter(active=True).count() == len(problem.shapes) - 1


def test_a_dropped_shape_without_results_is_deleted() -> None:
    sync_problems()
    name, problem = next(iter(load_catalogue().items()))
    if len(problem.shapes) < 2:
        pytest.skip("needs a problem with two shapes")
    sync_problems(
        {name: dataclasses.replace(problem, version=problem.version + 1, shapes=problem.shapes[1:])}
    )
    assert not Shape.objects.filter(problem__name=name, shape_id=problem.shapes[0].shape_id).exists()


def test_a_problem_gone_from_the_catalogue_is_deactivated_not_deleted() -> None:
    sync_problems()
    catalogue = load_catalogue()
    gone = next(iter(catalogue))
    report = sync_problems({name: p for name, p in catalogue.items() if name != gone})
    assert report.deactivated == [gone]
    assert Problem.objects.get(name=gone).active is False


def test_a_problem_whose_counts_fail_is_not_synced_and_the_others_are(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A partly converted import wrote counts for some of its shapes only: sync_problems raised
    KeyError, so every later import and `make run` (which syncs first) failed."""
    catalogue = load_catalogue()
    name, problem = next(iter(catalogue.items()))
    broken = dataclasses.replace(problem, name="broken_import")
    honest_counts = type(problem).counts

    def counts(self: Any, axes: dict[str, int]) -> Any:
        if self.name == "broken_import":
            raise KeyError(f"no derived counts at {axes}: counts were derived for the problem's shapes only")
        return honest_counts(self, axes)

    monkeypatch.setattr(type(problem), "counts", counts)
    report = sync_problems({**catalogue, "broken_import": broken})
    assert report.not_synced == ["broken_import"] and name in report.created
    assert "broken_import not synced: KeyError: " in report.warnings[0]
    assert not Problem.objects.filter(name="broken_import").exists()
    assert Problem.objects.filter(active=True).count() == len(catalogue)


def test_sync_gpu_types_loads_the_data_file_and_is_idempotent() -> None:
    assert "GPU types changed" in run("sync_gpu_types")
    before = sorted(GpuType.objects.values_list("key", "synced_at"))
    assert "GPU types unchanged" in run("sync_gpu_types")
    assert sorted(GpuType.objects.values_list("key", "synced_at")) == before
    assert {key for key, _ in before} == set(load_gpu_specs())


def test_gpu_type_figures_come_from_the_data_file_in_si_units() -> None:
    run("sync_gpu_types")
    specs = load_gpu_specs()
    h100 = GpuType.objects.get(key="h100")
    assert h100.hbm_bytes_per_s == pytest.approx(specs["h100"].hbm_tbps * 1e12)
    assert h100.peaks["bf16_tensor"] == specs["h100"].peaks_tflops["bf16_tensor"]
    cpu = GpuType.objects.get(key="cpu")
    assert cpu.development_device and cpu.arch is None
