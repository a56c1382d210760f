"""Headless Debian chromium driven by Playwright for the dashboard's browser tests.

Playwright's own browser download (`playwright install`) is not used: the tests launch the
system's /usr/bin/chromium, and skip, saying so, when it is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.api.dashboard.dashboard_browser import CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab (own sessionStorage), so every test signs in for itself."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()
