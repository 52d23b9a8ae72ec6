"""The wheels carried to the GPU machine (benchmarks/gpu_e2e_wheels.txt) cover the site's own
dependencies: one left out stopped `manage.py migrate` there, and with it a whole device call."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Dependencies the GPU machine's site worker and runner never import, each with its reason.
NOT_CARRIED = {
    "psycopg": "the device calls use SQLite",
    "redis": "carried on its own beside a Redis server when a part needs one (cluster_env.sh)",
    "gunicorn": "no web server runs there",
    "uvicorn": "no web server runs there",
}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_site_dependency_is_carried_to_the_gpu_machine() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    carried = {_name(line) for line in (REPO / "benchmarks/gpu_e2e_wheels.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    missing = {_name(req) for req in project["dependencies"]} - carried - set(NOT_CARRIED)
    assert not missing, f"add to benchmarks/gpu_e2e_wheels.txt, with their own needs: {sorted(missing)}"
