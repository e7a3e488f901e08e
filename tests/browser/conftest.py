"""Fixtures of the browser tests: one live demo office and one Chromium for the module.

Chromium is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``); nothing is
downloaded. Without it the tests are skipped on a developer machine and fail under CI.
Screenshots go to the test's temporary directory, or to the committed
``docs/screenshots/`` when ``OFFICE_SCREENSHOTS=1`` (to refresh the README's pictures).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from browser.harness import LiveOffice, chromium_path, live_office

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

#: Saves a full-page screenshot of a page under a name (without ``.png``).
Screenshot = Callable[[Page, str], None]


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveOffice]:
    with live_office(tmp_path_factory.mktemp("office")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium package)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, office: LiveOffice) -> Iterator[Page]:
    context = browser.new_context(base_url=office.url, viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


def sign_in(page: Page, office: LiveOffice) -> None:
    page.goto("/")
    assert "/login" in page.url
    page.fill("input[name=token]", office.token)
    page.click("button[type=submit]")
    page.wait_for_url(office.url + "/")


@pytest.fixture
def screenshot(tmp_path: Path) -> Screenshot:
    """Save screenshots in ``tmp_path``; in ``docs/screenshots/`` with OFFICE_SCREENSHOTS=1."""
    directory = SCREENSHOTS if os.environ.get("OFFICE_SCREENSHOTS") == "1" else tmp_path
    directory.mkdir(parents=True, exist_ok=True)

    def save(page: Page, name: str) -> None:
        page.screenshot(path=str(directory / f"{name}.png"), full_page=True)

    return save
