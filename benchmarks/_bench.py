"""The shared shape of the benchmark scripts: declared parameters, results where the caller says.

Shaped like ``triton.testing.perf_report``: a :class:`Benchmark` declares what varies (``x_names``
over ``x_vals``, every ``line_vals`` value of ``line_arg`` at each point) and what stays fixed
(``args``); ``perf_report(benchmark)(measure)`` binds the function that measures one point, and
``.run(out)`` calls it over the grid and writes ``OUT/<name>.json`` (rows under a provenance header)
and ``OUT/<name>.csv``.

Nothing here writes under ``benchmarks/results/``: that folder is the curated record (tables with
their provenance, written by hand from a run's output), never a script's default destination.

    from _bench import Benchmark, perf_report

    @perf_report(Benchmark("copy", x_names=("n",), x_vals=(1 << 20, 1 << 24), line_arg="dtype",
                           line_vals=("bf16", "fp32")))
    def copy(n: int, dtype: str) -> dict[str, float]:
        return {"us": time_it(n, dtype)}

    copy.run(Path(args.out))
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

Row = dict[str, Any]
Measure = Callable[..., Any]


@dataclass(frozen=True)
class Benchmark:
    """One declared grid: a row per (point, line), written to OUT/<name>.json and .csv."""

    name: str
    x_names: tuple[str, ...]
    x_vals: Sequence[Any]
    line_arg: str | None = None
    line_vals: Sequence[Any] = ()
    args: Mapping[str, Any] = field(default_factory=dict)

    def points(self) -> list[dict[str, Any]]:
        """What varies at every call, in order: each x value, then each line value (``args`` apart)."""
        lines = list(self.line_vals) if self.line_arg else [None]
        calls = []
        for x in self.x_vals:
            point = self.x_point(x)
            for line in lines:
                calls.append({**point, **({self.line_arg: line} if self.line_arg else {})})
        return calls

    def x_point(self, x: Any) -> dict[str, Any]:
        """A tuple gives one value per x name; anything else is every x name's value (as triton)."""
        if isinstance(x, tuple):
            if len(x) != len(self.x_names):
                raise ValueError(f"{self.name}: x value {x!r} does not name all of {self.x_names}")
            return dict(zip(self.x_names, x, strict=True))
        return {name: x for name in self.x_names}


def rows_of(point: Mapping[str, Any], value: Any) -> list[Row]:
    """A measurement as rows: a number is one row's ``value``, a mapping one row, a list several."""
    if isinstance(value, Mapping):
        return [{**point, **value}]
    if isinstance(value, list):
        return [row for item in value for row in rows_of(point, item)]
    return [{**point, "value": value}]


class Mark:
    """A measuring function bound to its benchmarks; ``run`` measures and writes them."""

    def __init__(self, measure: Measure, benchmarks: Benchmark | Sequence[Benchmark]) -> None:
        self.measure = measure
        self.benchmarks = [benchmarks] if isinstance(benchmarks, Benchmark) else list(benchmarks)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.measure(*args, **kwargs)

    def run(self, out: Path | None = None, print_data: bool = True, extra: Mapping[str, Any] | None = None,
            on_rows: Callable[[list[Row]], None] | None = None) -> dict[str, list[Row]]:
        """Measure every benchmark. Its rows are written (``out``) or handed over (``on_rows``) after
        every point, so that a run cut by a time limit still leaves what it measured: a device call
        that runs past its limit is killed, and a file written only at the end is then lost."""
        header = provenance() | dict(extra or {})
        results: dict[str, list[Row]] = {}
        for benchmark in self.benchmarks:
            rows = results.setdefault(benchmark.name, [])
            for point in benchmark.points():
                fresh = rows_of(point, self.measure(**point, **benchmark.args))
                rows.extend(fresh)
                if print_data:
                    for row in fresh:
                        print(json.dumps(row, default=str), flush=True)
                if out is not None:
                    write_rows(out, benchmark.name, rows, header)
                if on_rows is not None:
                    on_rows(rows)
        return results


def perf_report(benchmarks: Benchmark | Sequence[Benchmark]) -> Callable[[Measure], Mark]:
    """Decorate the function that measures one point of ``benchmarks``."""
    return lambda measure: Mark(measure, benchmarks)


def write_rows(out: Path, name: str, rows: Sequence[Row], header: Mapping[str, Any]) -> Path:
    """OUT/<name>.json ({"provenance": ..., "rows": [...]}) and OUT/<name>.csv (flat columns)."""
    path = write_json(out / f"{name}.json", {"rows": list(rows)}, header)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with (out / f"{name}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: flat(row.get(key)) for key in columns})
    return path


def flat(value: Any) -> Any:
    return json.dumps(value, default=str) if isinstance(value, (dict, list, tuple)) else value


def write_json(path: Path, payload: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> Path:
    """Write ``payload`` with its provenance first (``header``, or this machine's now)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"provenance": dict(header if header is not None else provenance()), **payload}
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return path


def output_argument(parser: argparse.ArgumentParser, what: str = "the results") -> None:
    """``--out``, required: a run's raw output goes where its caller says, never into the tree."""
    parser.add_argument("--out", type=Path, required=True, help=f"where {what} are written")


def provenance(device: str | None = None) -> dict[str, Any]:
    """When, where and from what a figure was measured: the header every result file carries."""
    facts: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit(), "working_tree_dirty": working_tree_dirty(),
        "host": platform.node(), "cores": os.cpu_count(), "python": platform.python_version(),
        "torch": package_version("torch"), "triton": package_version("triton"),
    }
    torch = sys.modules.get("torch")  # never imported for this alone: a CPU script stays light
    if torch is not None:
        facts["cuda"] = torch.version.cuda
    if device != "cpu":
        facts |= gpu_facts()
    return facts


def commit() -> str:
    """The caller's SOLBOARD_COMMIT first: a device machine gets the tree without its .git, or with
    a stale one, and then ``git rev-parse`` names some earlier commit, not the code that ran."""
    named = os.environ.get("SOLBOARD_COMMIT", "")
    if named and named != "unknown":
        return named
    return git("rev-parse", "HEAD") or "unknown"


def working_tree_dirty() -> bool | None:
    status = git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def git(*args: str) -> str | None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return None
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_facts() -> dict[str, Any]:
    """The GPUs (name, driver, memory, max SM clock) and ncu's version; empty without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return {}
    query = [
        "nvidia-smi",
        "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
        "--format=csv,noheader",
    ]
    done = subprocess.run(query, capture_output=True, text=True, timeout=30, check=False)
    facts: dict[str, Any] = {"gpus": [line.strip() for line in done.stdout.splitlines() if line.strip()]}
    if shutil.which("ncu"):
        version = subprocess.run(
            ["ncu", "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        facts["ncu"] = (version.stdout.strip().splitlines() or [""])[-1]
    return facts


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank percentile the runner benchmarks report (q in [0, 1])."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]
