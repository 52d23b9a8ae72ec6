"""benchmarks/_bench.py: declared grids, results where the caller says, provenance in every file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks._bench import Benchmark, perf_report, provenance, write_json


def test_every_x_value_meets_every_line_value_and_the_fixed_args_reach_the_function() -> None:
    seen: list[tuple[int, str, int]] = []

    @perf_report(Benchmark("grid", x_names=("n",), x_vals=(1, 2), line_arg="dtype", line_vals=("a", "b"),
                           args={"scale": 10}))
    def measure(n: int, dtype: str, scale: int) -> float:
        seen.append((n, dtype, scale))
        return n * scale

    rows = measure.run(print_data=False)["grid"]
    assert seen == [(1, "a", 10), (1, "b", 10), (2, "a", 10), (2, "b", 10)]
    # The fixed arguments are not results: a row holds what varied and what was measured.
    assert rows == [{"n": 1, "dtype": "a", "value": 10}, {"n": 1, "dtype": "b", "value": 10},
                    {"n": 2, "dtype": "a", "value": 20}, {"n": 2, "dtype": "b", "value": 20}]


def test_a_tuple_names_each_x_and_a_point_may_give_several_rows() -> None:
    benchmark = Benchmark("pairs", x_names=("distribution", "seed"), x_vals=(("normal", 7), ("outliers", 9)))
    mark = perf_report(benchmark)(lambda distribution, seed: [{"variant": "v1", "margin": seed / 10},
                                                              {"variant": "v2", "margin": seed / 20}])
    rows = mark.run(print_data=False)["pairs"]
    assert [(row["distribution"], row["seed"], row["variant"]) for row in rows] == [
        ("normal", 7, "v1"), ("normal", 7, "v2"), ("outliers", 9, "v1"), ("outliers", 9, "v2")]
    with pytest.raises(ValueError, match="does not name all"):
        Benchmark("bad", x_names=("a", "b"), x_vals=((1, 2, 3),)).points()


def test_results_go_where_the_caller_says_with_provenance_and_survive_a_cut_run(tmp_path: Path) -> None:
    calls = 0

    @perf_report(Benchmark("cut", x_names=("n",), x_vals=(1, 2, 3)))
    def measure(n: int) -> dict[str, object]:
        nonlocal calls
        calls += 1
        if n == 3:
            raise KeyboardInterrupt  # a device call killed at its time limit
        return {"us": n * 5, "shape": {"n": n}}

    with pytest.raises(KeyboardInterrupt):
        measure.run(tmp_path / "out", print_data=False, extra={"budget_s": 60})
    document = json.loads((tmp_path / "out" / "cut.json").read_text())
    assert calls == 3 and [row["us"] for row in document["rows"]] == [5, 10]
    assert document["provenance"]["budget_s"] == 60 and document["provenance"]["commit"]
    with (tmp_path / "out" / "cut.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert [(row["n"], row["us"], json.loads(row["shape"])) for row in table] == [("1", "5", {"n": 1}),
                                                                               ("2", "10", {"n": 2})]


def test_the_named_commit_wins_over_the_trees_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A device machine gets a copy of the tree whose .git, if any, is not the code that runs.
    monkeypatch.setenv("SOLBOARD_COMMIT", "0123abc")
    facts = provenance("cpu")
    assert facts["commit"] == "0123abc" and "gpus" not in facts
    assert {"date", "host", "python", "torch"} <= facts.keys()
    path = write_json(tmp_path / "deep" / "result.json", {"figure": 1.5}, facts)
    assert list(json.loads(path.read_text())) == ["provenance", "figure"]
