"""A real headless Chromium (Debian's `chromium`, driven by Playwright) on the console of a `jobsched dev`.

Playwright's own browser download is never used: the system browser is launched by path with a fresh profile
directory, with everything that would reach the network switched off. Every page collects the browser
console's errors and uncaught exceptions, and the test fails on any it did not declare as expected.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import (
    BrowserContext,
    ConsoleMessage,
    Error,
    Page,
    Playwright,
    ViewportSize,
    expect,
    sync_playwright,
)

from tests.support import REPO_ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# How long a page action or an `expect` waits for its condition: the machine running the tests may be busy,
# and a condition met late is still met (Playwright's `expect` alone would give up after 5 s).
WAIT_MS = 30_000
expect.set_options(timeout=WAIT_MS)
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
SCREENSHOTS = REPO_ROOT / "docs" / "console"
_SCRATCH = Path(tempfile.gettempdir()) / "jobsched-console-screenshots"


class ConsoleErrors:
    """What went wrong in one page's JavaScript or network, as the browser console reports it."""

    def __init__(self, page: Page) -> None:
        self.seen: list[str] = []
        self._expected: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.seen.append(message.text)

    def _on_page_error(self, error: Error) -> None:
        self.seen.append(f"uncaught: {error}")

    def expect(self, fragment: str) -> None:
        """A refusal the test provokes on purpose: the browser logs the API's 4xx answer as an error."""
        self._expected.append(fragment)

    def unexpected(self) -> list[str]:
        return [m for m in self.seen if not any(f in m for f in self._expected)]


class Browser:
    def __init__(self, playwright: Playwright, profile: Path) -> None:
        self._context: BrowserContext = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=DESKTOP
        )
        self.pages: list[tuple[Page, ConsoleErrors]] = []

    def open(self, viewport: ViewportSize = DESKTOP) -> tuple[Page, ConsoleErrors]:
        """A new tab (its own sessionStorage) at `viewport`, with its console watched."""
        page = self._context.new_page()
        page.set_viewport_size(viewport)
        page.set_default_timeout(WAIT_MS)
        errors = ConsoleErrors(page)
        self.pages.append((page, errors))
        return page, errors

    def close(self) -> None:
        self._context.close()


@contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = Browser(playwright, profile)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Page, name: str, *, full_page: bool = True) -> None:
    """Take the page as the documentation shows it (what fits the window when not `full_page`, for a long list).

    Every run takes every screenshot, so a page that cannot render fails here; they replace docs/console/ only
    with JOBSCHED_UPDATE_SCREENSHOTS=1, so an ordinary test run leaves the working tree as it found it."""
    target = SCREENSHOTS if os.environ.get("JOBSCHED_UPDATE_SCREENSHOTS") == "1" else _SCRATCH
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page, animations="disabled")
    assert path.read_bytes().startswith(b"\x89PNG"), f"{path} is not a PNG"
