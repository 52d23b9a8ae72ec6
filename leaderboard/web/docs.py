"""The project's documentation (``docs/*.md``) as pages of the site: ``/docs/`` and
``/docs/<name>.md``, so the pages' and messages' references to docs/ptx.md and the like resolve.

Rendered with markdown-it (CommonMark and tables) with raw HTML off: whatever a doc holds is
shown as text. A link to another doc (``ptx.md``, ``docs/ptx.md``) points at its page. Each page is
rendered once per process and file version (its modification time).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET
from markdown_it import MarkdownIt

DOC_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: href="ptx.md", href="docs/ptx.md#abi", href="../docs/ptx.md": the doc's own page.
DOC_LINK = re.compile(r'href="(?:\.\./)?(?:docs/)?([a-z0-9][a-z0-9_-]*)\.md(#[^"]*)?"')


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def doc_path(name: str) -> Path | None:
    path = docs_dir() / f"{name}.md"
    return path if DOC_NAME.match(name) and path.is_file() else None


@functools.lru_cache(maxsize=64)
def _rendered(path: Path, mtime: float) -> tuple[str, str]:
    """(title, html) of one doc at one version."""
    text = path.read_text(encoding="utf-8")
    heading = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return (heading.group(1).strip("` ") if heading else path.stem), DOC_LINK.sub(
        r'href="/docs/\1.md\2"', html
    )


def rendered(path: Path) -> tuple[str, str]:
    return _rendered(path, path.stat().st_mtime)


@require_GET
def doc_page(request: HttpRequest, name: str) -> HttpResponse:
    path = doc_path(name)
    if path is None:
        raise Http404("no such document")
    title, html = rendered(path)
    return render(request, "web/doc.html", {"title": title, "name": name, "body": mark_safe(html)})


@require_GET
def docs_index(request: HttpRequest) -> HttpResponse:
    found = sorted(path for path in docs_dir().glob("*.md") if DOC_NAME.match(path.stem))
    return render(request, "web/docs.html", {"docs": [(path.stem, rendered(path)[0]) for path in found]})
