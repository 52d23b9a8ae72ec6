"""``solboard manage import_problems``: convert, validate, write, then mirror into the database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluator.problems import IMPORTED_DIR_ENV, load_catalogue
from leaderboard.models import Problem

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
SXB = FIXTURES / "sol-execbench"
RK_SET = FIXTURES / "reference-kernels" / "problems" / "pmpp_like"


@pytest.fixture
def imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The catalogue's folder of imported problems, empty, for this test only."""
    folder = tmp_path / "imported"
    monkeypatch.setenv(IMPORTED_DIR_ENV, str(folder))
    load_catalogue.cache_clear()
    yield folder
    load_catalogue.cache_clear()


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_problems", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_an_imported_problem_is_written_and_synced_like_a_native_one(imported: Path) -> None:
    text = run("--format", "sol-execbench", str(SXB / "rmsnorm_h256"))
    assert "converted            rmsnorm_h256" in text and "problems changed" in text
    assert (imported / "rmsnorm_h256" / "problem.toml").is_file()
    row = Problem.objects.get(name="rmsnorm_h256")
    assert row.active and row.version == 1 and row.inputs[0]["name"] == "input"
    shapes = list(row.shapes.order_by("position"))
    assert [shape.axes["batch_size"] for shape in shapes] == [1, 7, 33, 512, 4096]
    assert all(shape.ranked for shape in shapes) and shapes[0].counts["bytes"] == 2 * (2 * 256 + 256)
    assert Problem.objects.filter(name="vector_add", active=True).exists()  # the native ones stay
    again = run("--format", "sol-execbench", str(SXB / "rmsnorm_h256"))
    assert "unchanged            rmsnorm_h256" in again and "not synced: nothing written" in again
    # the problem page shows the upstream reference, not the adapter
    from leaderboard.web.sol import reference_source

    assert "def run(input, weight, eps):" in reference_source(row)


def test_a_problem_without_counts_is_synced_ranked_with_derived_counts_and_its_page_says_so(
        imported: Path, client: Any) -> None:
    from django.core.management import call_command as manage

    run("--format", "reference-kernels", str(RK_SET / "vectoradd_py"))
    row = Problem.objects.get(name="pmpp_like_vectoradd_py")
    assert row.shapes.count() == 6 and row.shapes.filter(ranked=True).count() == 3  # the benchmarks
    big = row.shapes.get(shape_id="size16384")
    assert (
        big.counts["flops"] == {"fp32_simt": 16384.0 * 16384} and big.counts["bytes"] == 3 * 2 * 16384 * 16384
    )
    manage("sync_gpu_types", stdout=StringIO())
    page = client.get("/problems/pmpp_like_vectoradd_py/").content.decode()
    assert "Counts derived automatically" in page and "Source: <code>" in page
    native = client.get("/problems/vector_add/").content.decode()
    assert "Counts written by hand" in native and "Counts derived automatically" not in native


def test_refused_problems_are_reported_and_fail_the_command(imported: Path) -> None:
    out = StringIO()
    with pytest.raises(CommandError, match="1 problem\\(s\\) refused"):
        call_command(
            "import_problems", "--format", "sol-execbench", str(SXB / "missing_reference"), stdout=out
        )
    assert "why: missing reference" in out.getvalue()
    assert not imported.exists() or not any(imported.iterdir())


def test_writing_elsewhere_does_not_sync_and_json_says_why(imported: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    report = json.loads(
        run("--format", "reference-kernels", str(RK_SET / "softmax_py"), "--out", str(elsewhere), "--json")
    )
    assert report["import"]["summary"]["converted"] == 1
    assert (
        report["sync"]["synced"] is False
        and "is not the folder the catalogue reads" in report["sync"]["reason"]
    )
    assert (elsewhere / "pmpp_like_softmax_py" / "problem.toml").is_file()
    assert not Problem.objects.filter(name="pmpp_like_softmax_py").exists()


def test_a_dry_run_writes_and_syncs_nothing(imported: Path) -> None:
    text = run("--format", "reference-kernels", str(RK_SET / "softmax_py"), "--dry-run")
    assert "dry run: not written" in text and "not synced: dry run" in text
    assert not imported.exists() and not Problem.objects.filter(name="pmpp_like_softmax_py").exists()


def test_a_folder_without_problems_of_the_format_is_an_error(imported: Path) -> None:
    with pytest.raises(CommandError, match="no sol-execbench problem"):
        run("--format", "sol-execbench", str(RK_SET))
