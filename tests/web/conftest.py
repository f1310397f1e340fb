"""Fixtures of the web tests: a host with session-reference and the web plugin, and a client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from starlette.testclient import TestClient

import dsh_host.web
from dsh_host import Host
from dsh_host.testing import HostFactory
from dsh_host.web.app import build_app
from dsh_host.web.cli import make_reader
from dsh_host.web.guard import Guard

if TYPE_CHECKING:
    from playwright.sync_api import Browser

TOKEN = "test-secret"
PORT = 8767
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def web_host(make_host: HostFactory) -> Host:
    """A host with session-reference and `web` mounted (no sources)."""
    return make_host(["session-reference"], objects={"web": dsh_host.web})


@pytest.fixture
def client(web_host: Host) -> Iterator[TestClient]:
    """A client of the guarded app, signed in (it carries the secret's cookie)."""
    with TestClient(guarded(web_host), base_url=BASE, follow_redirects=False) as test_client:
        assert test_client.get(f"/?token={TOKEN}").status_code == 303
        yield test_client


def guarded(host: Host, extra_host: str | None = None) -> Guard:
    return Guard(build_app(make_reader(host)), token=TOKEN, port=PORT, extra_host=extra_host)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium under Playwright (a missing browser fails the test).

    One per module: Playwright's synchronous API keeps an event loop running on this thread
    while it lives, where no later test could run one of its own.
    """
    from playwright.sync_api import sync_playwright

    from tests.web.browser import CHROMIUM

    assert CHROMIUM.exists(), f"the browser tests need {CHROMIUM}: apt-get install chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            launched.close()
