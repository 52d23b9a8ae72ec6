"""benchmarks/results/: the curated record's links and anchors lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)")


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
    topics = {page.name for page in RESULTS.glob("*.md")} - {"README.md", "runners.md"}
    assert {topic for topic in topics if f"]({topic})" not in index} == set()
