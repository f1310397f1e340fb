"""The freshness index: what dsh last read from each of the agents' files, in dsh's data dir.

One SQLite file (`sources.sqlite3` in the data dir) serves every source of this distribution.
`files` keeps, per source and file, the file's size and mtime when it was read (an entry is
fresh while both are unchanged), the session it holds (or none) and the counts of lines the
read skipped. `texts` is a full-text index (FTS5, the tokenizer the SQLite store uses) of each
session's surface messages, under rowid `(file pk << 20) | position`. All sources share it,
so body matches of different sources are ranked with the same statistics.

Only this file is ever written: the agents' folders are opened for reading, nothing else.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from dsh_host import SearchCancelled
from dsh_host.text import has_surrogate
from dsh_sources.transcript import Transcript

INDEX_FILE = "sources.sqlite3"
TOKENIZER = "unicode61 remove_diacritics 2"
_ORD_BITS = 20
_BUSY_MS = 10_000
_PROGRESS_STEPS = 2_000
_TEXT_BATCH = 500
# The best-ranked message of each file: SQLite gives a bare column the row its min() came from.
_BEST_PER_FILE = (
    f"SELECT rowid, min(rank) FROM (SELECT rowid, rank FROM texts WHERE texts MATCH ?) GROUP BY rowid >> {_ORD_BITS}"
)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS files (
    pk INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    path BLOB NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    agent_id TEXT,
    cwd BLOB,
    created_at INTEGER,
    updated_at INTEGER,
    title BLOB,
    messages INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    oversized INTEGER NOT NULL DEFAULT 0,
    UNIQUE (source, path)
);
CREATE INDEX IF NOT EXISTS files_by_agent_id ON files (source, agent_id);
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(text, tokenize = '{TOKENIZER}');
"""


class Entry(NamedTuple):
    """A file the index holds a session of."""

    pk: int
    agent_id: str
    path: str
    size: int
    mtime_ns: int
    cwd: str | None
    created_at: int
    updated_at: int
    title: str | None
    messages: int


def _blob(text: str | None) -> bytes | None:
    # Paths and agent text may hold lone surrogates (undecodable bytes); bytes carry them intact.
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _text(value: str | bytes | None) -> str | None:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


class SourceIndex:
    """One source's rows of the shared index file; safe to use from several threads."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._write = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connection()
        with self._transaction(conn):
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(statement)

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
        conn.execute(f"BEGIN {mode}")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    # -- freshness ---------------------------------------------------------------------------

    def known(self) -> dict[str, tuple[int, int]]:
        """Every file indexed for this source: path to (size, mtime_ns) when it was read."""
        rows = self._connection().execute("SELECT path, size, mtime_ns FROM files WHERE source = ?", (self.source,))
        return {os.fsdecode(path): (size, mtime) for path, size, mtime in rows}

    def put(self, found: Iterable[tuple[str, int, int, Transcript | None]]) -> None:
        """Record what reading each file (path, size, mtime) found, replacing what was there, in one transaction."""
        conn = self._connection()
        with self._write, self._transaction(conn):
            for path, size, mtime_ns, transcript in found:
                self._put(conn, path, size, mtime_ns, transcript)

    def _put(
        self, conn: sqlite3.Connection, path: str, size: int, mtime_ns: int, transcript: Transcript | None
    ) -> None:
        self._forget(conn, [path])
        values = (self.source, os.fsencode(path), size, mtime_ns)
        if transcript is None:
            conn.execute("INSERT INTO files (source, path, size, mtime_ns) VALUES (?, ?, ?, ?)", values)
            return
        cursor = conn.execute(
            "INSERT INTO files (source, path, size, mtime_ns, agent_id, cwd, created_at, updated_at, title, "
            "messages, skipped, oversized) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                *values,
                transcript.agent_id,
                _blob(transcript.cwd),
                transcript.created_at,
                transcript.updated_at,
                _blob(transcript.title),
                len(transcript.messages),
                transcript.skipped,
                transcript.oversized,
            ),
        )
        pk = cursor.lastrowid
        assert pk is not None
        conn.executemany(
            "INSERT INTO texts (rowid, text) VALUES (?, ?)",
            (
                ((pk << _ORD_BITS) | position, _searchable("\n".join(message.texts)))
                for position, message in enumerate(transcript.messages[: 1 << _ORD_BITS])
            ),
        )

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the entries of files that are gone."""
        paths = list(paths)
        if not paths:
            return
        conn = self._connection()
        with self._write, self._transaction(conn):
            self._forget(conn, paths)

    def _forget(self, conn: sqlite3.Connection, paths: list[str]) -> None:
        for path in paths:
            row = conn.execute(
                "SELECT pk FROM files WHERE source = ? AND path = ?", (self.source, os.fsencode(path))
            ).fetchone()
            if row is None:
                continue
            (pk,) = row
            conn.execute(
                "DELETE FROM texts WHERE rowid BETWEEN ? AND ?", (pk << _ORD_BITS, ((pk + 1) << _ORD_BITS) - 1)
            )
            conn.execute("DELETE FROM files WHERE pk = ?", (pk,))

    # -- reads -------------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every indexed session of this source (a file holding none is left out)."""
        rows = self._connection().execute(
            "SELECT pk, agent_id, path, size, mtime_ns, cwd, created_at, updated_at, title, messages "
            "FROM files WHERE source = ? AND agent_id IS NOT NULL",
            (self.source,),
        )
        return [_entry(row) for row in rows]

    def reports(self, agent_id: str | None = None) -> list[tuple[str, str | None, int, int]]:
        """(path, agent id, skipped, oversized) of the files whose reads skipped lines."""
        sql = "SELECT path, agent_id, skipped, oversized FROM files WHERE source = ? AND skipped > 0"
        params: tuple[object, ...] = (self.source,)
        if agent_id is not None:
            sql, params = sql + " AND agent_id = ?", (*params, agent_id)
        rows = self._connection().execute(sql + " ORDER BY path", params)
        return [(os.fsdecode(path), agent, skipped, over) for path, agent, skipped, over in rows]

    def body_matches(self, match: str, cancel: threading.Event | None) -> Iterator[tuple[int, int, float]]:
        """(file pk, text rowid, BM25 rank) of the best message matching `match` of each file."""
        conn = self._connection()
        if cancel is not None:
            conn.set_progress_handler(cancel.is_set, _PROGRESS_STEPS)
        try:
            rows = conn.execute(_BEST_PER_FILE, (match,)).fetchall()
        except sqlite3.OperationalError:
            if cancel is not None and cancel.is_set():
                raise SearchCancelled("candidate search was cancelled") from None
            raise
        finally:
            if cancel is not None:
                conn.set_progress_handler(None, 0)
        for rowid, rank in rows:
            yield rowid >> _ORD_BITS, rowid, rank

    def texts(self, rowids: list[int]) -> dict[int, str]:
        """The indexed text of each message, by rowid."""
        conn = self._connection()
        out: dict[int, str] = {}
        for start in range(0, len(rowids), _TEXT_BATCH):
            batch = rowids[start : start + _TEXT_BATCH]
            marks = ",".join("?" * len(batch))
            for rowid, text in conn.execute(f"SELECT rowid, text FROM texts WHERE rowid IN ({marks})", batch):
                out[rowid] = _text(text) or ""
        return out


def _searchable(text: str) -> str | bytes:
    return text if text.isascii() or not has_surrogate(text) else text.encode("utf-8", "surrogatepass")


def _entry(row: tuple[Any, ...]) -> Entry:
    pk, agent_id, path, size, mtime, cwd, created, updated, title, messages = row
    return Entry(pk, agent_id, os.fsdecode(path), size, mtime, _text(cwd), created, updated, _text(title), messages)
