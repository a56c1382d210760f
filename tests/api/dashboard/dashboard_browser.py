"""Helpers of the dashboard's browser tests: the chromium skip, screenshots, signing in."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = PROJECT_ROOT / "tests-artifacts" / "dashboard"
requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is not installed (`apt-get install -y chromium`; `make test` installs it)",
)


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sign_in(
    page: Page, api_url: str, access_key_id: str, secret: str, region: str, *, route: str = ""
) -> None:
    """Open the dashboard, submit the key pair, and wait for the first page of data."""
    page.goto(f"{api_url}/dashboard{route}")
    page.fill("#access-key-id", access_key_id)
    page.fill("#secret-access-key", secret)
    page.fill("#region", region)
    page.click("#sign-in")
    page.wait_for_selector("#signed-in-as")
    page.wait_for_selector("#updated[data-at]")
