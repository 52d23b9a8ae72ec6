"""Upstream solutions of imported problems through the normal path: does what people wrote for
GPU MODE or SOL-ExecBench pass SOLboard's harness as it is?

    python benchmarks/import_solutions.py IMPORTED_DIR SOURCE_TREE [...] [--device cpu|cuda]
        [--out FILE.json] [--only NAME ...]

For each problem in ``IMPORTED_DIR`` (written by ``import-problems``), its upstream solution is
found in the source trees by the ``[import] source`` path: a reference-kernels task's own
``submission.py``; a SOL-ExecBench folder's ``solution*.json`` in a Python language, else a
``solution.json`` made from the definition's own reference (``run``, not destination-passing),
which is what a SOL-ExecBench user submits first. Each runs through ``python -m evaluator run``
(``--shapes quick``; on the CPU the problem's CPU shapes) and its status is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

PYTHON_LANGUAGES = {"pytorch", "python", "triton", "cute_dsl", "cutile"}
REPO = Path(__file__).resolve().parents[1]


def source_folder(meta: dict[str, Any], trees: list[Path]) -> Path | None:
    """The problem's source folder in one of the trees, from ``REPO:PATH@COMMIT``."""
    path = str(meta.get("source", "")).split(":", 1)[-1].split("@")[0]
    for tree in trees:
        for base in (tree, *tree.parents):
            if (base / path).is_dir():
                return base / path
    return None


def solutions(fmt: str, folder: Path, scratch: Path) -> list[Path]:
    if fmt == "reference-kernels":
        return [folder / "submission.py"] if (folder / "submission.py").is_file() else []
    found = []
    for path in sorted(folder.glob("solution*.json")):
        spec = json.loads(path.read_text()).get("spec", {})
        if {str(item).lower() for item in spec.get("languages") or []} & PYTHON_LANGUAGES:
            found.append(path)
    if found:
        return found
    definition = json.loads((folder / "definition.json").read_text())
    reference = definition.get("reference") or (folder / "reference.py").read_text()
    made = scratch / f"{folder.name}_reference_solution.json"
    made.write_text(
        json.dumps(
            {
                "name": "reference",
                "definition": definition["name"],
                "author": "upstream reference",
                "spec": {
                    "languages": ["pytorch"],
                    "entry_point": "reference.py::run",
                    "destination_passing_style": False,
                },
                "sources": [{"path": "reference.py", "content": reference}],
            }
        )
    )
    return [made]


def run(problem: str, submission: Path, imported: Path, device: str) -> dict[str, Any]:
    env = {**os.environ, "SOLBOARD_IMPORTED_PROBLEMS": str(imported)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "run",
            problem,
            str(submission),
            "--device",
            device,
            "--shapes",
            "quick",
            "--json",
            "--no-profile",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return {"status": "NO_REPORT", "message": result.stderr[-500:]}
    return {"status": report.get("status"), "message": (report.get("message") or "")[:300]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("imported", type=Path)
    parser.add_argument("trees", type=Path, nargs="+")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for toml in sorted(args.imported.glob("*/problem.toml")):
            name = toml.parent.name
            if args.only and name not in args.only:
                continue
            meta = tomllib.loads(toml.read_text())["import"]
            folder = source_folder(meta, args.trees)
            for submission in solutions(meta["format"], folder, Path(scratch)) if folder else []:
                row = {
                    "problem": name,
                    "solution": submission.name,
                    **run(name, submission, args.imported, args.device),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    passed = sum(row["status"] == "PASSED" for row in rows)
    print(f"{passed} of {len(rows)} upstream solutions PASSED on {args.device}", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
