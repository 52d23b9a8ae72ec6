"""benchmarks/results/: the curated record stays small, and every link to it, from the record itself, the
docs, the READMEs and the code, leads to a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)")
#: A path into the record as prose and code name it: ``benchmarks/results/witness.md#cost``, or from inside
#: benchmarks/, ``results/data/runner_jobs_h200.json``.
CITED = re.compile(r"(?<![\w.-])(benchmarks/results|results)/([\w./*-]*)(?:#([\w-]+))?")
#: Where the record is cited: the docs, the READMEs, and the code and tests with their problem files.
CITING = ["README.md", "docs/*.md", "benchmarks/*.md", "benchmarks/*.py", "benchmarks/*.sh", "tests/**/*.py",
          "evaluator/**/*.py", "evaluator/**/*.toml", "runners/**/*.py", "leaderboard/**/*.py",
          "solboard_common/**/*.py", "solboard_client/**/*.py"]
#: The issue's bound on the record (it held 8.5 MB of raw logs before they were summarised).
MAX_BYTES = 1_000_000


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", sorted(RESULTS.glob("*.md")), ids=lambda page: page.name)
def test_every_link_of_the_record_names_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target, anchor in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        linked = (page.parent / target) if target else page
        if not linked.exists() or (anchor and anchor not in anchors(linked)):
            broken.append(f"{target}#{anchor}")
    assert not broken, f"{page.name}: {broken}"


def test_the_index_names_every_topic_file() -> None:
    index = (RESULTS / "README.md").read_text()
    topics = {page.name for page in RESULTS.glob("*.md")} - {"README.md"}
    assert {topic for topic in topics if f"]({topic})" not in index} == set()


def test_the_record_stays_under_a_megabyte() -> None:
    sizes = {path.relative_to(RESULTS): path.stat().st_size for path in RESULTS.rglob("*") if path.is_file()}
    assert sum(sizes.values()) < MAX_BYTES, sorted(sizes.items(), key=lambda item: -item[1])[:5]


def cited_paths(source: Path) -> list[tuple[str, Path, str]]:
    """(as written, the path it names, its anchor) for each citation of the record in ``source``."""
    found = []
    for prefix, rest, anchor in CITED.findall(source.read_text(errors="replace")):
        if prefix == "results" and source.parent.name != "benchmarks":
            continue  # "results/" alone means the record only in benchmarks/'s own files
        rest = rest.rstrip(".")
        found.append((f"{prefix}/{rest}" + (f"#{anchor}" if anchor else ""), RESULTS / rest, anchor))
    return found


def leads_somewhere(path: Path, anchor: str) -> bool:
    if "*" in path.name:  # a pattern such as data/runner_jobs_*.json names at least one file
        return any(path.parent.glob(path.name))
    return path.exists() and not (anchor and path.suffix == ".md" and anchor not in anchors(path))


def test_every_path_into_the_record_that_docs_and_code_name_exists_with_its_heading() -> None:
    sources = sorted({path for pattern in CITING for path in REPO.glob(pattern)} - set(RESULTS.rglob("*")))
    broken = [f"{source.relative_to(REPO)}: {written}" for source in sources
              for written, path, anchor in cited_paths(source) if not leads_somewhere(path, anchor)]
    assert len(sources) > 100 and not broken, broken
