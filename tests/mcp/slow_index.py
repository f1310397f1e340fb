"""A throwaway indexed session source for the `dsh mcp` indexing tests, mounted in a `dsh mcp` process.

The documented notes source (`examples/notes_source.py`) with an index: its build indexes the
first note at once, then waits until the test opens the FIFO `[sources.notes] release`
for writing, and indexes the rest. Listings and searches see only indexed notes; a read reads
the note itself, indexed or not. The build runs on a non-daemon thread that only the release
or `close` ends, so a process that exits promptly while it waits has closed its sources. With
`hang_on_close = true`, `close` waits for the release too: a build that does not cancel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_host import CandidateRow, Host, SessionRow, hookimpl
from dsh_host.hookspecs import SourceFactory
from dsh_host.sources import IndexProgress
from examples.notes_source import NotesSource

NAME = "notes"
"""The notes source's own name: its sessions are `notes:<file name>`."""


class SlowIndexSource(NotesSource):
    """Notes whose index is built by a background build the test releases."""

    display_name = "Slow notes"

    def __init__(self, folder: Path, release: Path, *, hang_on_close: bool = False) -> None:
        super().__init__(folder)
        self._release = release
        self._hang_on_close = hang_on_close
        self._files = sorted(folder.glob("*.md"))
        self._indexed: set[str] = set()
        self._go = threading.Event()
        self._cancelled = False
        self._build: threading.Thread | None = None
        self._lock = threading.Lock()

    def build_index(self, *, background: bool = False, cancel: threading.Event | None = None) -> IndexProgress:
        with self._lock:
            if self._build is None:
                self._build = threading.Thread(target=self._run, name="notes-index")
                self._build.start()
        return self.index_progress()

    def _run(self) -> None:
        self._indexed.add(self._files[0].name)
        threading.Thread(target=self._await_release, daemon=True).start()
        self._go.wait()
        if not self._cancelled:
            self._indexed.update(path.name for path in self._files)

    def _await_release(self) -> None:
        with self._release.open("rb") as fifo:  # returns once the test opens it for writing
            fifo.read()
        self._go.set()

    def index_progress(self) -> IndexProgress:
        indexed = [path for path in self._files if path.name in self._indexed]
        return IndexProgress(
            files_done=len(indexed),
            files_total=len(self._files),
            bytes_done=sum(path.stat().st_size for path in indexed),
            bytes_total=sum(path.stat().st_size for path in self._files),
            building=self._build is not None and self._build.is_alive(),
            complete=len(indexed) == len(self._files),
        )

    def _is_indexed(self, session_id: str) -> bool:
        return session_id.removeprefix("notes:") in self._indexed

    def list_sessions(self) -> list[SessionRow]:
        return [row for row in super().list_sessions() if self._is_indexed(row.id)]

    def search_candidates(self, query: str, **kwargs: Any) -> list[CandidateRow]:
        return [row for row in super().search_candidates(query, **kwargs) if self._is_indexed(row.id)]

    def close(self) -> None:
        if not self._hang_on_close:
            self._cancelled = True
            self._go.set()
        if self._build is not None:
            self._build.join()


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    def open_source(host: Host, table: dict[str, Any]) -> SlowIndexSource:
        return SlowIndexSource(
            Path(table["dir"]), Path(table["release"]), hang_on_close=table.get("hang_on_close", False)
        )

    register(NAME, open_source)
