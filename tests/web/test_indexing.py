"""While a source's index builds, the list says so and fills in as the build goes on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

import dsh_host.web
from dsh_host.testing import HostFactory
from tests.mcp import slow_index
from tests.web.conftest import BASE, TOKEN, guarded

WAIT_SECONDS = 20


def test_the_list_says_which_sources_are_still_indexing(make_host: HostFactory, tmp_path: Path) -> None:
    notes, release = tmp_path / "notes", tmp_path / "release"
    notes.mkdir()
    for n in range(3):
        (notes / f"note{n}.md").write_text(f"Note number {n}\n\nabout the parser", encoding="utf-8")
    os.mkfifo(release)
    host = make_host(
        ["session-reference"],
        objects={"notes": slow_index, "web": dsh_host.web},
        config={"sources": {"notes": {"dir": str(notes), "release": str(release)}}},
    )
    with TestClient(guarded(host), base_url=BASE) as client:
        assert client.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 303
        # The builds start with the server, on a worker thread: the page says so once they have.
        page = wait_for(client, lambda text: "Still indexing the sessions of Slow notes" in text)
        assert page.count('class="session"') == 1
        with release.open("wb"):  # the build goes on and indexes every note
            pass
        page = wait_for(client, lambda text: "Still indexing" not in text)
        assert page.count('class="session"') == 3


def wait_for(client: TestClient, shows: Callable[[str], bool]) -> str:
    """The list page once it `shows` what the test waits for (within `WAIT_SECONDS`)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not shows(page := client.get("/").text):
        assert time.monotonic() < deadline, "the list never showed it"
    return page
