"""OpenCode's sessions as dsh sessions (the format of the `opencode` source): where its stores are.

Where: `[sources.opencode] dir`, else `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode`.
Since 1.2 OpenCode keeps every session in one SQLite database there, `opencode.db` (or
`opencode-<channel>.db` for other release channels), which it holds open in WAL mode while it
runs (`opencode_db` reads it strictly read-only). Before 1.2 it kept a folder of JSON files,
`storage/` (`opencode_storage`); the upgrade copies it into the database once and leaves it in
place, so a session in both is served from the database. Both readers hand each session's rows
to `opencode_projection`, which says what a session shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_sources.folders import names
from dsh_sources.formats.opencode_db import read_database, signature
from dsh_sources.formats.opencode_storage import read_storage
from dsh_sources.opencode import NAME
from dsh_sources.transcript import WHOLE, SessionSink, StoreRead

if TYPE_CHECKING:
    import threading

PROJECTION = 1
"""The version of `opencode_projection`'s rules: raise it when they change (the stores are read again)."""
DATABASE = "opencode.db"
STORAGE = "storage"


class OpenCodeFormat:
    """OpenCode's stores under `base`: its databases, and the JSON folder of versions before 1.2."""

    provider = NAME

    def __init__(self, base: Path) -> None:
        self.base = base

    def stores(self) -> Iterator[str]:
        """`opencode.db` and each `opencode-<channel>.db`, then `storage/` when it holds sessions."""
        for name in names(self.base):
            if name == DATABASE or (name.startswith("opencode-") and name.endswith(".db")):
                path = self.base / name
                if path.is_file():
                    yield str(path)
        if (self.base / STORAGE / "session").is_dir():
            yield str(self.base / STORAGE)

    def locate(self, agent_id: str) -> list[str]:
        """Every store (a session's id does not say which holds it, and there are few)."""
        return list(self.stores())

    def signature(self, path: str) -> tuple[int, ...] | None:
        return signature(path) if path.endswith(".db") else None

    def read(
        self,
        path: str,
        marks: Mapping[str, str],
        sink: SessionSink,
        cancel: threading.Event | None = None,
        share: tuple[int, int] = WHOLE,
    ) -> StoreRead:
        if path.endswith(".db"):
            return read_database(path, marks, sink, cancel, share)
        return read_storage(path, marks, sink, cancel, share)

    def rank(self, path: str) -> int:
        """A database serves a session before the older JSON folder does."""
        return 1 if path.endswith(".db") else 0

    def titles(self) -> Mapping[str, str]:
        return {}
