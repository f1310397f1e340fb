"""Chromium (Debian's, at /usr/bin/chromium) driven by Playwright, with a watch on every page.

The browser is required: without it a browser test fails, never skips. Each page is watched
for what hostile text must never cause: a dialog, a script error, a console error (a
Content-Security-Policy violation is one) or a request to another origin.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Dialog, Page, Request, expect

CHROMIUM = Path(os.environ.get("DSH_CHROMIUM", "/usr/bin/chromium"))
"""The browser the tests drive (`apt-get install chromium`)."""
TIMEOUT_MS = 20_000
"""How long a wait for what the page shows may take before the test fails."""
expect.set_options(timeout=TIMEOUT_MS)


@dataclass
class Watch:
    """What went wrong on the watched pages, one line each."""

    origin: str
    problems: list[str] = field(default_factory=list)

    def dialog(self, dialog: Dialog) -> None:
        self.problems.append(f"dialog {dialog.type}: {dialog.message}")
        dialog.dismiss()

    def page_error(self, error: Exception) -> None:
        self.problems.append(f"script error: {error}")

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def request(self, request: Request) -> None:
        if not (request.url.startswith(self.origin + "/") or request.url.startswith("file:")):
            self.problems.append(f"request to another origin: {request.url}")

    def attach(self, page: Page) -> Page:
        page.on("dialog", self.dialog)
        page.on("pageerror", self.page_error)
        page.on("console", self.console)
        page.on("request", self.request)
        page.set_default_timeout(TIMEOUT_MS)
        return page


@contextmanager
def watched_page(
    browser: Browser, origin: str, *, dark: bool = False, width: int = 1280, height: int = 900
) -> Iterator[tuple[Page, Watch]]:
    """A fresh context on `origin` (clipboard allowed, downloads accepted), its page, and its watch.

    The block must leave the watch without problems; it is checked when the block ends.
    """
    context: BrowserContext = browser.new_context(
        color_scheme="dark" if dark else "light",
        viewport={"width": width, "height": height},
        accept_downloads=True,
    )
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    watch = Watch(origin)
    try:
        yield watch.attach(context.new_page()), watch
        assert watch.problems == [], watch.problems
    finally:
        context.close()
