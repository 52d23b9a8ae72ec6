"""Every page at a phone's width (390 px) and on a desktop, in headless Chromium against a live
`make run` seeded with ranked results (tests/integration/seed_pages.py): nothing overflows the
page sideways, the record chart keeps its last label inside and draws each leader's dashed line
over the record line, /favicon.ico and the docs pages answer, the tokens page says how to use a
token. Screenshots of each page at both widths go to ``$SOLBOARD_ARTIFACTS/pages/``.

The cast (seed_pages.py): alice, bob and carol ranked on vector_add (H200); alice holds the
record and is signed in where a page needs a user.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.integration.live_site import REPO, live_site, manage
from tests.integration.seed_pages import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
NARROW, WIDE = {"width": 390, "height": 844}, {"width": 1280, "height": 900}
pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's chromium is not installed (.ci/run installs it)"
    ),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with live_site(tmp_path_factory.mktemp("pages-var"), SOLBOARD_DEV_RUNNER="false") as env:
        last = manage(env, "shell", "-c", "from tests.integration.seed_pages import seed; seed()")
        yield {**env, "submission": last.splitlines()[-1]}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get("SOLBOARD_ARTIFACTS", REPO / "var" / "test-artifacts")) / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def signed_in(browser: Browser, site: dict[str, str], viewport: dict[str, int]) -> Page:
    page = browser.new_context(base_url=site["SOLBOARD_SERVER"], viewport=viewport).new_page()  # type: ignore[arg-type]
    page.goto("/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def pages(site: dict[str, str]) -> dict[str, str]:
    return {
        "home": "/",
        "problem": "/problems/vector_add/?gpu=h200",
        "report": f"/submissions/{site['submission']}/",
        "submit": "/submit/",
        "tokens": "/account/tokens/",
        "runners": "/runners/",
        "user": "/users/alice/",
        "integrity": "/integrity/",
        "docs": "/docs/ptx.md",
    }


def overflow(page: Page) -> dict[str, Any]:
    """How wide the page is, and the widest elements that stick out of the viewport."""
    return page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        const out = [...document.querySelectorAll('body *')]
          .filter(e => e.getBoundingClientRect().right > width + 1
            && !e.closest('.scroll, .table, table, pre, .highlight'))
          .slice(0, 5).map(e => `${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`);
        return {scroll: document.documentElement.scrollWidth, width, out};
    }""")


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["390px", "1280px"])
def test_no_page_overflows_sideways(browser: Browser, site: dict[str, str], shots: Path,
                                   viewport: dict[str, int]) -> None:
    page = signed_in(browser, site, viewport)
    for name, url in pages(site).items():
        page.goto(url)
        found = overflow(page)
        page.screenshot(path=str(shots / f"{name}-{viewport['width']}.png"), full_page=True)
        assert found["scroll"] <= viewport["width"], (name, found)


def test_the_record_chart_keeps_its_labels_inside_and_the_leaders_line_on_top(
    browser: Browser, site: dict[str, str], shots: Path
) -> None:
    page = signed_in(browser, site, WIDE)
    page.goto("/problems/vector_add/?gpu=h200")
    chart = page.locator("svg.chart").first
    chart.scroll_into_view_if_needed()
    chart.screenshot(path=str(shots / "record-chart.png"))
    box = page.evaluate("""(svg) => {
        const view = svg.viewBox.baseVal;
        const texts = [...svg.querySelectorAll('text')].map(t => t.getBBox())
          .filter(b => b.x < view.x - 0.5 || b.x + b.width > view.x + view.width + 0.5);
        const lines = [...svg.querySelectorAll('polyline')].map(p => p.getAttribute('class'));
        return {clipped: texts.length, lines};
    }""", chart.element_handle())
    assert box["clipped"] == 0
    assert box["lines"][0] == "record" and len(box["lines"]) >= 3  # the dashed lines come after: on top
    # Where alice's line runs along the record (the right edge), what is seen is her dashed line.
    on_top = page.evaluate("""(svg) => {
        const record = svg.querySelector('polyline.record').points;
        const last = record.getItem(record.numberOfItems - 1);
        const before = record.getItem(record.numberOfItems - 2);
        const point = svg.createSVGPoint(); point.x = (last.x + before.x) / 2; point.y = last.y;
        const screen = point.matrixTransform(svg.getScreenCTM());
        const hit = document.elementFromPoint(screen.x, screen.y);
        return hit && hit.getAttribute('class');
    }""", chart.element_handle())
    assert on_top is not None and on_top.startswith("trend"), on_top


def test_the_favicon_and_the_docs_pages_answer(site: dict[str, str], browser: Browser) -> None:
    with urllib.request.urlopen(site["SOLBOARD_SERVER"] + "/favicon.ico", timeout=10) as answer:
        assert answer.status == 200 and answer.headers["Content-Type"] == "image/x-icon"
        assert answer.read()[:4] == b"\x00\x00\x01\x00"
    page = signed_in(browser, site, WIDE)
    page.goto("/problems/vector_add/")
    for link in page.locator("a[href^='/docs/']").all():
        assert page.request.get(link.get_attribute("href") or "").status == 200
    page.goto("/docs/")
    assert page.locator("#docs a").count() >= 10
    page.click("#docs a[href='/docs/api.md']")
    assert "The REST API" in page.locator("h1").first.inner_text()


def test_the_tokens_page_says_how_to_use_a_token(browser: Browser, site: dict[str, str]) -> None:
    page = signed_in(browser, site, WIDE)
    page.goto("/account/tokens/")
    page.fill("#id_name", "laptop")
    page.click("button:has-text('Create')")
    token = page.locator("[data-token]").inner_text().strip()
    usage = page.locator("#token-usage").inner_text()
    assert f"export SOLBOARD_SERVER={site['SOLBOARD_SERVER']}" in usage
    assert f"export SOLBOARD_TOKEN={token}" in usage
    assert f'curl -H "Authorization: Bearer $SOLBOARD_TOKEN" {site["SOLBOARD_SERVER"]}/api/' in usage
