"""The website in a real browser: Playwright drives Debian's headless Chromium (/usr/bin/chromium,
installed by .ci/run; no downloaded browser build) against `solboard dev` (web, site worker and
the CPU runner) on a fresh SQLite database and embedded broker.

One journey, as a person would make it: sign up, see an upload refused with the error beside the
source, upload vector_add, watch it go queued -> passed on the CPU runner, find it on the cpu
ranking, open its report, make it public, log out and read it as a visitor. Screenshots of the
main pages are kept in ``var/test-artifacts/web/`` (``SOLBOARD_ARTIFACTS`` to change it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from tests.integration.live_site import REPO, live_site

CHROMIUM = Path("/usr/bin/chromium")
VECTOR_ADD = (REPO / "examples" / "python" / "vector_add.py").read_text()
EVALUATION_TIMEOUT_S = 300

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's chromium is not installed (.ci/run installs it)"
    ),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`solboard dev` on its own var folder, database and broker; stopped (whole group) afterwards."""
    with live_site(tmp_path_factory.mktemp("browser-var"), SOLBOARD_DEV_GPU_TYPE="cpu") as env:
        yield env["SOLBOARD_SERVER"]


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("SOLBOARD_ARTIFACTS", REPO / "var" / "test-artifacts")) / "web"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(site: str) -> Iterator[Page]:
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        context = browser.new_context(base_url=site, viewport={"width": 1280, "height": 900})
        yield context.new_page()
        browser.close()


def statuses_until_final(page: Page, timeout_s: float) -> list[str]:
    """Every status the report's live block shows, in order, until it shows a final one."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        badge = page.locator("#live-status [data-status]").first
        try:
            status = badge.get_attribute("data-status", timeout=2000)
        except PlaywrightError:  # the page is being reloaded by htmx: look again
            status = None
        if status and (not seen or seen[-1] != status):
            seen.append(status)
        if status in ("passed", "failed", "error", "timeout", "rejected", "cancelled"):
            return seen
        time.sleep(0.5)
    pytest.fail(f"still {seen} after {timeout_s}s")


def test_a_person_signs_up_uploads_watches_it_pass_finds_it_ranked_and_shares_it(
        page: Page, artifacts: Path) -> None:
    p = page
    p.goto("/accounts/signup/")
    p.fill("#id_username", "walker")
    p.fill("#id_password1", "a-long-pass-phrase-9")
    p.fill("#id_password2", "a-long-pass-phrase-9")
    p.click("text=Create the account")
    p.wait_for_url("**/")
    assert p.locator(".account").inner_text().startswith("walker")
    p.screenshot(path=str(artifacts / "home.png"), full_page=True)

    p.goto("/submit/?problem=vector_add")
    p.fill("#id_source", "def kernel(a, b, c:\n    pass\n")
    p.click("button:has-text('Submit')")
    error = p.locator("[data-field='source']").inner_text()
    assert "Python does not parse: line 1" in error
    assert p.input_value("#id_source").startswith("def kernel(a, b, c:")
    p.screenshot(path=str(artifacts / "upload-error.png"), full_page=True)

    p.fill("#id_source", VECTOR_ADD)
    assert p.is_checked("input[name=mode][value=test]")  # the default, as the API and the CLI
    p.check("input[name=mode][value=ranked]")
    p.click("button:has-text('Submit')")
    p.wait_for_url("**/submissions/*/")
    report_url = p.url
    seen = statuses_until_final(p, EVALUATION_TIMEOUT_S)
    assert seen[0] in ("queued", "running") and seen[-1] == "passed", seen
    p.wait_for_selector("text=Ranked on the CPU development board", timeout=30000)
    p.screenshot(path=str(artifacts / "report-owner.png"), full_page=True)

    p.goto("/problems/vector_add/?gpu=cpu")
    row = p.locator("[data-board='problem'] tr[data-user='walker']")
    assert row.locator("td").first.inner_text() == "1"
    p.screenshot(path=str(artifacts / "problem.png"), full_page=True)
    row.locator("a[href^='/submissions/']").first.click()
    p.wait_for_url(report_url)

    p.click("summary:has-text('Make public')")
    assert p.locator("#make-public").inner_text().count("cannot be undone") == 1
    p.click("button:has-text('Make the source public for good')")
    p.wait_for_selector("text=public source")
    p.click("button:has-text('Log out')")
    p.goto(report_url)
    assert p.locator(".account").inner_text().startswith("Log in")
    assert p.locator(".highlight").count() == 1
    assert p.locator("#owner-actions").count() == 0
    assert "def kernel" in p.locator(".highlight").inner_text()
    p.screenshot(path=str(artifacts / "report-visitor.png"), full_page=True)
