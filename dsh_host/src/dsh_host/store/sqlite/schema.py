"""The SQLite store's file and schema: creating them, recognising them, upgrading older versions.

Version history (`PRAGMA user_version`): 1, the session tables; 2, the search indexes; 3, each
session's last activity; 4, the body index contentless and keyed by surface position, about a
third of the size of the layout before; 5, each session's ranking keys for search
(`session_rank`); 6, the indexes of the listing by last activity, of all sessions and of one
cwd's. An older database is upgraded on first open, in one transaction (before
version 4, its search indexes built anew): a process killed meanwhile leaves the old version
whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from dsh_host.store.base import StoreError
from dsh_host.store.sqlite import search

SCHEMA_VERSION = 6
APPLICATION_ID = 0x64736821  # "dsh!": tells our database apart from any other SQLite file
SQLITE_MAGIC = b"SQLite format 3\x00"

# Version 6: the listing by last activity, of every session and of one cwd's, read in index order.
_ACTIVITY_INDEXES = """
CREATE INDEX IF NOT EXISTS sessions_by_activity ON sessions (last_activity_at DESC, id);
CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions (cwd, last_activity_at DESC, id);
"""

_SCHEMA = (
    """
CREATE TABLE sessions (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    created_at NUMERIC NOT NULL,
    cwd TEXT,
    header TEXT NOT NULL,
    next_seq INTEGER NOT NULL,
    next_ord INTEGER NOT NULL,
    title TEXT,
    title_seq INTEGER,
    title_time INTEGER,
    raw_surface_text INTEGER NOT NULL DEFAULT 0,
    last_activity_at NUMERIC NOT NULL DEFAULT 0
);
CREATE INDEX sessions_newest_first ON sessions (created_at DESC, id);
CREATE TABLE events (
    key INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    line TEXT NOT NULL
);
CREATE TABLE surface (
    session_pk INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    source_kind TEXT,
    source_plugin TEXT,
    text TEXT NOT NULL,
    PRIMARY KEY (session_pk, ord)
) WITHOUT ROWID;
CREATE UNIQUE INDEX surface_by_seq ON surface (session_pk, seq);
"""
    + _ACTIVITY_INDEXES
)

# Version 3: the time of each session's last event (its creation time while it has none), read
# from the event line at `next_seq - 1` (a line that is not JSON, which no reader could use,
# counts as none).
_ADD_LAST_ACTIVITY = """
ALTER TABLE sessions ADD COLUMN last_activity_at NUMERIC NOT NULL DEFAULT 0;
UPDATE sessions SET last_activity_at = coalesce(
    (SELECT CASE WHEN json_valid(line) THEN json_extract(line, '$.time') END FROM events
        WHERE key = (sessions.pk << 32) | (sessions.next_seq - 1)),
    created_at
);
"""

Progress = Callable[[int, int], None]
"""`progress(done, total)`: how far a long schema upgrade is (in sessions)."""


def check_magic(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite touches it (an empty file is new)."""
    with open(path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a dsh session store (not an SQLite database); it was left untouched")


def version_of(conn: sqlite3.Connection, path: Path) -> int | None:
    """The schema version of the database, None for an empty one; `StoreError` for one not ours."""
    try:
        # One read transaction: another process creating the schema meanwhile must not be seen
        # half before and half after its commit (tables, but no application id yet).
        conn.execute("BEGIN")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        finally:
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a dsh session store: {exc}") from None
    if version == 0 and app_id == 0 and tables == 0:
        return None
    if app_id != APPLICATION_ID:
        raise StoreError(f"{path} is an SQLite database but not a dsh session store")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this dsh supports ({SCHEMA_VERSION}); "
            "upgrade dsh to open it"
        )
    if version < 1:
        raise StoreError(f"{path} has unknown schema version {version}")
    return version


def create(conn: sqlite3.Connection) -> None:
    """Create the schema (inside the caller's write transaction), unless another process just did."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
        for statement in _statements(_SCHEMA + search.SEARCH_SCHEMA):
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def upgrade(conn: sqlite3.Connection, progress: Progress | None) -> None:
    """Bring an older schema to the current version (inside the caller's write transaction).

    Version 3 added the last activity; version 4 changed the search indexes' layout, so every
    older version (1 had none) gets them dropped, created and filled here; version 5 added the
    ranking keys, which version 4 gets beside its indexes; version 6 the indexes of the listing
    by last activity.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have upgraded it
    if version == SCHEMA_VERSION:
        return
    if version < 4:
        search.drop_indexes(conn)
        for statement in _statements(search.SEARCH_SCHEMA):
            conn.execute(statement)
        search.fill_indexes(conn, progress)
    elif version < 5:
        for statement in _statements(search.RANK_SCHEMA):
            conn.execute(statement)
        search.fill_rank(conn)
    if version < 3:
        for statement in _statements(_ADD_LAST_ACTIVITY):
            conn.execute(statement)
    for statement in _statements(_ACTIVITY_INDEXES):
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _statements(script: str) -> Iterator[str]:
    """The statements of a schema script, triggers whole (their bodies hold `;` too)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
