"""The embedded default store: one SQLite file (WAL) holding every session's log.

Schema choices, each for a figure the store must meet:

- `events` keeps each event's full log line as JSON text under an integer key
  `(session_pk << 32) | seq`, so one B-tree holds a session's log in order and a point lookup
  is a rowid lookup.
- `surface` materialises every session's current surface (`ord` is the position key): an
  append adds a row, a replace deletes the shadowed run and takes the position of its first
  node. Reading a surface joins these rows to their events and never touches chunks or
  shadowed events, so it costs time in proportion to the surface, not the log. Each row also
  keeps the node's `SurfaceText` (type, source, display text), so readers that need only the
  text of a conversation read small rows and decode no JSON.
- `sessions` keeps the header, the next seq, and the latest title, so listing sessions with
  titles reads no log.
- `surface_fts` and `session_names` are the full-text indexes candidate search reads, kept by
  triggers in the transaction that writes the rows they mirror (see `dsh_host.store.sqlite_search`).
  Schema version 2 added them; a version 1 database gets them on first open.

Every flushed batch is one `BEGIN IMMEDIATE` transaction; a busy timeout lets two processes
write different sessions at once. Reads run on per-thread connections, so async callers can
run them in worker threads.
"""

from __future__ import annotations

import contextlib
import functools
import json
import operator
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from itertools import compress
from pathlib import Path
from typing import Any

from dsh_host.session.events import (
    SURFACE_TYPES,
    Event,
    SessionHeader,
    SurfaceText,
    event_from_json,
    line_of,
    seq_of,
    surface_text,
    type_of,
)
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
from dsh_host.store import sqlite_search
from dsh_host.store.base import CandidateRow, SessionNotFound, SessionRow, StoredTitle, StoreError
from dsh_host.store.rows import header_from_row, json_text, surface_snapshot, surface_texts

SCHEMA_VERSION = 2
APPLICATION_ID = 0x64736821  # "dsh!": tells our database apart from any other SQLite file
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000
MMAP_BYTES = 1 << 34  # SQLite caps it at its compile-time maximum (2 GiB unless built otherwise)
_SEQ_BITS = 32

_SCHEMA = """
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
    raw_surface_text INTEGER NOT NULL DEFAULT 0
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

Progress = Callable[[int, int], None]
"""`progress(done, total)`: how far a long schema upgrade is (in sessions)."""


# Only these types can touch the surface rows (the fold refuses a surface marker on any other) or the title.
_MARKED_TYPES = SURFACE_TYPES | {"session/title"}
_INSERT_SURFACE = (
    "INSERT INTO surface (session_pk, ord, seq, type, source_kind, source_plugin, text) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _surface_row(event: Event) -> tuple[Any, ...]:
    text = surface_text(event.type, event.data)
    return (text.type, _text(text.source_kind), _text(text.source_plugin), _text(text.text))


_INSERT_EVENT = "INSERT INTO events (key, type, line) VALUES (?, ?, ?)"
# Rows per statement, largest first, for batches: one statement execution inserts many rows
# where executemany binds, steps and resets once per row (a 1,000-event turn inserts about a
# third faster). 256 rows bind 768 parameters, under SQLite's oldest limit (999).
_INSERT_EVENTS = [
    (rows, "INSERT INTO events (key, type, line) VALUES " + ", ".join(["(?, ?, ?)"] * rows)) for rows in (256, 64, 16)
]

_Title = tuple[Any, int, int]
"""A title as the sessions row keeps it: stored text, seq and time of its `session/title` event."""


class _Batch:
    """A batch of events as the store writes it, checked and picked apart before any SQL runs.

    A flush is mostly stream chunks, so the per-event work runs in C (`map`, `compress`, `zip`)
    and Python looks only at the few events that touch the surface or the title.
    """

    __slots__ = ("events", "first", "kinds", "last", "marked", "title")

    def __init__(self, header: SessionHeader, events: Sequence[Event]) -> None:
        first = events[0].seq
        seqs = list(map(seq_of, events))
        if seqs != list(range(first, first + len(seqs))):
            at = next(i for i, seq in enumerate(seqs) if seq != first + i)
            raise StoreError(
                f"session {header.id!r}: batch is not contiguous (seq {seqs[at]} where {first + at} "
                "was expected); nothing was written"
            )
        self.events = events
        self.first, self.last = first, seqs[-1]
        self.kinds = list(map(type_of, events))
        self.marked = list(compress(events, map(_MARKED_TYPES.__contains__, self.kinds)))
        self.title: _Title | None = None
        for event in self.marked:
            if event.type == "session/title" and isinstance(event.data, dict):
                title = event.data.get("title")
                if isinstance(title, str):
                    self.title = (_text(title), event.seq, event.time)

    def row_values(self, base: int) -> list[Any]:
        """The `events` rows' values, one row after another (key, type, line), keys from `base`."""
        kinds: list[Any] = self.kinds
        if not all(map(str.isascii, kinds)):
            kinds = list(map(_text, kinds))  # a lone surrogate makes a type bytes
        lines = list(map(line_of, self.events))
        for at in compress(range(len(lines)), map(operator.not_, lines)):
            lines[at] = self.events[at].to_line()  # an event built without its line
        if not all(map(str.isascii, lines)):
            lines = list(map(json_text, lines))
        values: list[Any] = [None] * (3 * len(lines))
        values[0::3] = range(base | self.first, base | (self.last + 1))
        values[1::3] = kinds
        values[2::3] = lines
        return values


def _insert_events(conn: sqlite3.Connection, values: list[Any]) -> None:
    """Insert event rows given as one flat list of their values (see `_Batch.row_values`)."""
    at, end = 0, len(values)
    for size, statement in _INSERT_EVENTS:
        while end - at >= 3 * size:
            conn.execute(statement, values[at : at + 3 * size])
            at += 3 * size
    if at < end:
        rest = values[at:]
        conn.executemany(_INSERT_EVENT, zip(rest[0::3], rest[1::3], rest[2::3], strict=True))


def _session_row(conn: sqlite3.Connection, session_id: str, columns: str) -> tuple[Any, ...]:
    """The named columns of a session's row; SessionNotFound when it is not stored."""
    row = conn.execute(f"SELECT {columns} FROM sessions WHERE id = ?", (_id(session_id),)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return row


# Rows of the four surface text columns become `SurfaceText` records in C. No public API builds
# a NamedTuple without a Python call per record (its `_make` is `tuple.__new__` plus a length
# check, in Python): a prepared reference reads thousands of rows, and that call cost as much
# as reading them. The query selects exactly the record's fields, in order, so the check
# cannot fail. Tested on every supported Python (the records' type and fields).
_surface_text_of = functools.partial(tuple.__new__, SurfaceText)


def _key(pk: int, seq: int) -> int:
    return (pk << _SEQ_BITS) | seq


# Session ids, cwds and titles are arbitrary Python strings, lone surrogates included, which
# SQLite's UTF-8 text cannot hold. Ids are stored as their UTF-8 bytes ("surrogatepass"): a
# BLOB compares and sorts bytewise, which for UTF-8 is code-point order, so `ORDER BY id` stays
# exact. Other free text becomes a BLOB only when it holds a surrogate, and JSON text escapes
# the surrogate (`\ud800`), which parses back to the same string.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _id(session_id: str) -> bytes:
    return session_id.encode("utf-8", "surrogatepass")


def _text(value: str | None) -> str | bytes | None:
    if value is None or value.isascii() or not _SURROGATE.search(value):
        return value
    return value.encode("utf-8", "surrogatepass")


def _from_text(value: str | bytes | None) -> str | None:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


class SqliteSessionStore:
    """Sessions persisted in one SQLite file. Open with `SqliteSessionStore.open(path)`."""

    def __init__(self, path: Path, progress: Progress | None = None) -> None:
        self.path = path
        self._progress = progress
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(cls, path: Path | str, *, progress: Progress | None = None) -> SqliteSessionStore:
        """Open (creating it, mode 0600 in a 0700 directory) and check the database file.

        A database of an older schema is upgraded in one transaction; `progress` hears how far
        an upgrade that indexes the stored sessions has come.
        """
        path = Path(path)
        created = _create_file(path)
        if not created:
            _check_magic(path)
        store = cls(path, progress)
        store._prepare_schema()
        return store

    # -- connections -------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"session store {self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA synchronous = NORMAL")
            # Reads map the file instead of copying pages through read() calls, and threads
            # reading different sessions then contend on nothing but the OS page cache. All of
            # it, as far as SQLite allows: pages past the map go through read() into a 2 MB page
            # cache, and a search's lookups over a 100,000-session store (370 MB) reach them.
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            sqlite_search.register_fold(conn, _text, _from_text)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _prepare_schema(self) -> None:
        conn = self._connection()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"{self.path} is not a dsh session store: {exc}") from None
        if version == 0 and app_id == 0 and tables == 0:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                    for statement in _statements(_SCHEMA + sqlite_search.SEARCH_SCHEMA):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return
        if app_id != APPLICATION_ID:
            self.close()
            raise StoreError(f"{self.path} is an SQLite database but not a dsh session store")
        if version > SCHEMA_VERSION:
            self.close()
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this dsh supports ({SCHEMA_VERSION}); "
                "upgrade dsh to open it"
            )
        if version not in (1, SCHEMA_VERSION):
            self.close()
            raise StoreError(f"{self.path} has unknown schema version {version}")
        conn.execute("PRAGMA journal_mode = WAL")
        if version == 1:
            self._add_search_indexes(conn)

    def _add_search_indexes(self, conn: sqlite3.Connection) -> None:
        """Upgrade version 1 to 2: create and fill the search indexes, in one transaction."""
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] == 1:  # not upgraded meanwhile
                    for statement in _statements(sqlite_search.SEARCH_SCHEMA):
                        conn.execute(statement)
                    sqlite_search.fill_indexes(conn, self._progress)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()

    # -- writes ------------------------------------------------------------------------------

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Persist a contiguous batch in one transaction; the first batch creates the session."""
        if not events:
            return
        batch = _Batch(header, events)
        conn = self._connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT pk, next_seq, next_ord FROM sessions WHERE id = ?", (_id(header.id),)
                ).fetchone()
                if row is None:
                    if batch.first != 0:
                        raise StoreError(f"session {header.id!r} is not stored; its first batch must start at seq 0")
                    pk = self._insert_session(conn, header, batch.title)
                    next_seq, next_ord = 0, 0
                else:
                    pk, next_seq, next_ord = row
                if batch.first != next_seq:
                    raise StoreError(
                        f"session {header.id!r}: batch starts at seq {batch.first}, store expects {next_seq} "
                        "(another process wrote this session?)"
                    )
                self._write_events(conn, pk, batch, next_ord, titled=row is None)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _insert_session(self, conn: sqlite3.Connection, header: SessionHeader, title: _Title | None) -> int:
        # A new session's first batch usually carries its title: writing it with the row indexes
        # the name once, where a later UPDATE would re-index it.
        cursor = conn.execute(
            "INSERT INTO sessions (id, created_at, cwd, header, next_seq, next_ord, title, title_seq, title_time) "
            "VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?)",
            (
                _id(header.id),
                header.created_at,
                _text(header.cwd),
                json_text(json.dumps(header.to_json(), ensure_ascii=False)),
                *(title or (None, None, None)),
            ),
        )
        return cursor.lastrowid

    def _write_events(self, conn: sqlite3.Connection, pk: int, batch: _Batch, next_ord: int, *, titled: bool) -> None:
        """Insert a batch's event rows, then update the surface and session rows.

        `titled`: the session row already holds the batch's title (it was created with it).
        """
        _insert_events(conn, batch.row_values(pk << _SEQ_BITS))
        next_ord = self._write_surface(
            conn, pk, [event for event in batch.marked if event.surface_op is not None], next_ord
        )
        if batch.title is None or titled:
            conn.execute("UPDATE sessions SET next_seq = ?, next_ord = ? WHERE pk = ?", (batch.last + 1, next_ord, pk))
        else:
            conn.execute(
                "UPDATE sessions SET next_seq = ?, next_ord = ?, title = ?, title_seq = ?, title_time = ? WHERE pk = ?",
                (batch.last + 1, next_ord, *batch.title, pk),
            )

    def _write_surface(self, conn: sqlite3.Connection, pk: int, nodes: Sequence[Event], next_ord: int) -> int:
        """Apply the surface events of a batch to the surface rows; returns the next position."""
        raw_text = False
        for event in nodes:
            op = event.surface_op
            surface_row = _surface_row(event)
            raw_text = raw_text or any(type(value) is bytes for value in surface_row)
            if op == "append":
                conn.execute(_INSERT_SURFACE, (pk, next_ord, event.seq, *surface_row))
                next_ord += 1
            else:
                lo = conn.execute(
                    "SELECT ord FROM surface WHERE session_pk = ? AND seq = ?", (pk, op["start"])
                ).fetchone()
                hi = conn.execute(
                    "SELECT ord FROM surface WHERE session_pk = ? AND seq = ?", (pk, op["end"])
                ).fetchone()
                if lo is None or hi is None or lo[0] > hi[0]:
                    raise StoreError(f"stored surface disagrees with replace at seq {event.seq}")
                conn.execute("DELETE FROM surface WHERE session_pk = ? AND ord BETWEEN ? AND ?", (pk, lo[0], hi[0]))
                conn.execute(_INSERT_SURFACE, (pk, lo[0], event.seq, *surface_row))
        if raw_text:
            # Readers of the surface text then know to turn stored bytes back into text.
            conn.execute("UPDATE sessions SET raw_surface_text = 1 WHERE pk = ?", (pk,))
        return next_ord

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        """Store a whole, already validated log in one transaction (`replace` drops an existing one)."""
        conn = self._connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT pk FROM sessions WHERE id = ?", (_id(header.id),)).fetchone()
                if row is not None:
                    if not replace:
                        raise StoreError(f"session {header.id!r} already exists (use --replace to overwrite it)")
                    self._delete(conn, row[0])
                batch = _Batch(header, events) if events else None
                pk = self._insert_session(conn, header, batch and batch.title)
                if batch is not None:
                    self._write_events(conn, pk, batch, 0, titled=True)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def delete(self, session_id: str) -> bool:
        conn = self._connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT pk FROM sessions WHERE id = ?", (_id(session_id),)).fetchone()
                if row is not None:
                    self._delete(conn, row[0])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return row is not None

    def _delete(self, conn: sqlite3.Connection, pk: int) -> None:
        conn.execute("DELETE FROM events WHERE key BETWEEN ? AND ?", (_key(pk, 0), _key(pk, (1 << _SEQ_BITS) - 1)))
        conn.execute("DELETE FROM surface WHERE session_pk = ?", (pk,))
        conn.execute("DELETE FROM sessions WHERE pk = ?", (pk,))

    # -- reads -------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionRow]:
        """Every stored session, newest first (ties by id), with its latest title."""
        rows = (
            self._connection()
            .execute("SELECT id, created_at, cwd, title FROM sessions ORDER BY created_at DESC, id")
            .fetchall()
        )
        make = SessionRow._make
        return [
            make((sid.decode("utf-8", "surrogatepass"), created, _from_text(cwd), _from_text(title)))
            for sid, created, cwd, title in rows
        ]

    def has(self, session_id: str) -> bool:
        row = self._connection().execute("SELECT 1 FROM sessions WHERE id = ?", (_id(session_id),)).fetchone()
        return row is not None

    def read_header(self, session_id: str) -> SessionHeader:
        (header_text,) = _session_row(self._connection(), session_id, "header")
        return header_from_row(header_text, session_id)

    def read_title(self, session_id: str) -> StoredTitle | None:
        title, seq, time = _session_row(self._connection(), session_id, "title, title_seq, title_time")
        return None if title is None else StoredTitle(_from_text(title), seq, time)

    def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        cancel: threading.Event | None = None,
    ) -> list[CandidateRow]:
        """Ranked sessions matching `query` by name or surface text (see `SessionStore.search_candidates`)."""
        return sqlite_search.search(
            self._connection(),
            query,
            target=None if target_id is None else _id(target_id),
            target_cwd=_text(target_cwd),
            limit=limit,
            cancel=cancel,
            from_text=_from_text,
        )

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read transaction."""
        with self._read() as conn:
            pk, header_text, next_seq = _session_row(conn, session_id, "pk, header, next_seq")
            lines = conn.execute(
                "SELECT e.line FROM surface AS s JOIN events AS e ON e.key = (s.session_pk << 32) | s.seq "
                "WHERE s.session_pk = ? ORDER BY s.ord",
                (pk,),
            ).fetchall()
        return surface_snapshot(header_text, session_id, next_seq, lines)

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Header, last seq and each surface node's `SurfaceText` of several sessions, in order.

        One read transaction serves them all, so the sessions are observed at the same instant.
        """
        with self._read() as conn:
            return [self._surface_texts(conn, session_id) for session_id in session_ids]

    def _surface_texts(self, conn: sqlite3.Connection, session_id: str) -> SurfaceTexts:
        pk, header_text, next_seq, raw_text = _session_row(conn, session_id, "pk, header, next_seq, raw_surface_text")
        rows = conn.execute(
            "SELECT type, source_kind, source_plugin, text FROM surface WHERE session_pk = ? ORDER BY ord", (pk,)
        ).fetchall()
        # Text holding a lone surrogate is stored as UTF-8 bytes (see `_text`); all else is str.
        if raw_text:
            texts = [SurfaceText(kind, *map(_from_text, fields)) for kind, *fields in rows]
        else:
            texts = list(map(_surface_text_of, rows))
        return surface_texts(header_text, session_id, next_seq, texts)

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event line of a session, in seq order, in one read transaction."""
        with self._read() as conn:
            pk, header_text = _session_row(conn, session_id, "pk, header")
            lines = conn.execute(
                "SELECT line FROM events WHERE key BETWEEN ? AND ? ORDER BY key",
                (_key(pk, 0), _key(pk, (1 << _SEQ_BITS) - 1)),
            ).fetchall()
        return header_from_row(header_text, session_id), [line for (line,) in lines]

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction on this thread's connection: reads inside see one snapshot."""
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        header, lines = self.read_lines(session_id)
        return header, [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]


def _statements(script: str) -> Iterator[str]:
    """The statements of a schema script, triggers whole (their bodies hold `;` too)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""


def _create_file(path: Path) -> bool:
    """Create the database file exclusively with mode 0600 (directory 0700); False if it exists."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _check_magic(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite touches it (an empty file is new)."""
    with open(path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a dsh session store (not an SQLite database); it was left untouched")
