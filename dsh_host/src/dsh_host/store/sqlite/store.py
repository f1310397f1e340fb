"""`SqliteSessionStore`: the store's operations on its file (see `dsh_host.store.sqlite` for the schema).

Every flushed batch is one `BEGIN IMMEDIATE` transaction; a busy timeout lets two processes
write different sessions at once. Reads run on per-thread connections, so async callers can
run them in worker threads. A driven session's lease is a lock file beside the database
(`dsh_host.store.sqlite.locks`).
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from dsh_host.files import private_file
from dsh_host.session.events import Event, SessionHeader, SurfaceText, surface_text
from dsh_host.session.snapshots import EventsPage, SurfacePage, SurfaceSnapshot, SurfaceTexts
from dsh_host.store import pages, rows
from dsh_host.store.base import (
    ActivityKey,
    CandidateRow,
    ListingKey,
    QuickLease,
    SessionNotFound,
    SessionRow,
    StoredTitle,
    StoreError,
)
from dsh_host.store.codec import encode, from_sqlite, to_sqlite
from dsh_host.store.leases import OutstandingLeases
from dsh_host.store.sqlite import locks, relevance, schema, search
from dsh_host.store.sqlite.connection import Transaction, WriterBusy, connect, connect_quick
from dsh_host.store.sqlite.schema import Progress

QUICK_EVENTS = 4096
"""The most events `append_now` writes on the calling thread (about as long as appending them took)."""
QUICK_BYTES = 1 << 20
"""The most log text, in characters, `append_now` writes on the calling thread."""
# SQLite's own automatic checkpoint threshold, in log pages, and what a quick write is counted
# as adding: its text over the default page size, plus the pages every commit rewrites
# (the session row, the surface, the search indexes' segments, interior pages).
_CHECKPOINT_PAGES = 1000
_PAGE_BYTES = 4096
_PAGES_PER_COMMIT = 8

_SEQ_BITS = 32
_LAST_SEQ = (1 << _SEQ_BITS) - 1

_INSERT_SURFACE = (
    "INSERT INTO surface (session_pk, ord, seq, type, source_kind, source_plugin, text) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EVENT = "INSERT INTO events (key, type, line) VALUES (?, ?, ?)"
# Rows per statement, largest first, for batches: one statement execution inserts many rows
# where executemany binds, steps and resets once per row (a 1,000-event turn inserts about a
# third faster). 256 rows bind 768 parameters, under SQLite's oldest limit (999).
_INSERT_EVENTS = [
    (size, "INSERT INTO events (key, type, line) VALUES " + ", ".join(["(?, ?, ?)"] * size)) for size in (256, 64, 16)
]


# Rows of the four surface text columns become `SurfaceText` records in C. No public API builds
# a NamedTuple without a Python call per record (its `_make` is `tuple.__new__` plus a length
# check, in Python): a prepared reference reads thousands of rows, and that call cost as much
# as reading them. The query selects exactly the record's fields, in order, so the check
# cannot fail. Tested on every supported Python (the records' type and fields).
_surface_text_of = functools.partial(tuple.__new__, SurfaceText)


_LISTED = "id, created_at, cwd, title, last_activity_at"
_LIST = f"SELECT {_LISTED} FROM sessions ORDER BY created_at DESC, id"
_FIRST_PAGE = f"{_LIST} LIMIT :limit"
# A page starts right after the key (created_at, id) in newest-first order: the index range
# below that created_at, less the ties at it that sort before the id.
_PAGE_AFTER = (
    f"SELECT {_LISTED} FROM sessions WHERE created_at <= :at AND (created_at < :at OR id > :id) "
    "ORDER BY created_at DESC, id LIMIT :limit"
)
# The listing by last activity, read along `sessions_by_activity` (or `sessions_by_cwd` for one
# cwd), a page after a key starting as `_PAGE_AFTER` does.
_BY_ACTIVITY = f"SELECT {_LISTED} FROM sessions WHERE {{}} ORDER BY last_activity_at DESC, id LIMIT :limit"
_ACTIVE_AFTER = "last_activity_at <= :at AND (last_activity_at < :at OR id > :id)"
# A surface page: the session's nodes below a position, newest first, along the primary key; only
# readable nodes with text are read, and each one's time from its event line.
_SURFACE_PAGE = (
    "SELECT s.ord, s.seq, json_extract(e.line, '$.time'), s.type, s.source_kind, s.source_plugin, s.text "
    "FROM surface AS s JOIN events AS e ON e.key = (s.session_pk << 32) | s.seq "
    "WHERE s.session_pk = :pk AND s.ord < :before "
    f"AND s.type IN {pages.READABLE_SQL} AND s.text <> '' "
    "ORDER BY s.ord DESC LIMIT :limit"
)


def _key(pk: int, seq: int) -> int:
    """An `events` row's key: the session's rows sort together, in seq order."""
    return (pk << _SEQ_BITS) | seq


# The distinct cwds by one index seek each (the next cwd after the last), not a scan of every
# session's entry in the index: the list page reads them on every view, and there are far fewer
# directories than sessions.
_DISTINCT_CWDS = """
WITH RECURSIVE found(cwd) AS (
    SELECT MIN(cwd) FROM sessions
    UNION ALL
    SELECT (SELECT MIN(cwd) FROM sessions WHERE cwd > found.cwd) FROM found WHERE found.cwd IS NOT NULL
)
SELECT cwd FROM found WHERE cwd IS NOT NULL
"""


class SqliteSessionStore:
    """Sessions persisted in one SQLite file. Open with `SqliteSessionStore.open(path)`."""

    def __init__(self, path: Path, progress: Progress | None = None) -> None:
        self.path = path
        self._progress = progress
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._quick: sqlite3.Connection | None = None
        # Log pages the quick writes committed without a checkpoint (an estimate, see `append_now`).
        self._unchecked_pages = 0
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._leases: OutstandingLeases[locks.FileLease] = OutstandingLeases()
        self._locks_folder = locks.locks_folder(path)
        self._closed = False

    @classmethod
    def open(cls, path: Path | str, *, progress: Progress | None = None) -> SqliteSessionStore:
        """Open (creating it, mode 0600 in a 0700 directory) and check the database file.

        A database of an older schema is upgraded in one transaction; `progress` hears how far
        an upgrade that indexes the stored sessions has come.
        """
        path = Path(path)
        if not private_file(path):  # mode 0600; SQLite gives its -wal and -shm files the same
            schema.check_magic(path)
        store = cls(path, progress)
        try:
            store._prepare_schema()
        except StoreError:
            store.close()
            raise
        return store

    # -- connections and transactions --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"session store {self.path} is closed")

    def _kept(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """`conn`, listed among the connections `close` closes."""
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _connection(self) -> sqlite3.Connection:
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._kept(connect(self.path))
        return conn

    def _write(self) -> Transaction:
        """One write transaction on this thread's connection, one writer of this store at a time."""
        return Transaction(self._connection(), "BEGIN IMMEDIATE", self._write_lock)

    def _read(self) -> Transaction:
        """One read transaction on this thread's connection: reads inside see one snapshot."""
        return Transaction(self._connection(), "BEGIN")

    def _prepare_schema(self) -> None:
        conn = self._connection()
        version = schema.version_of(conn, self.path)
        conn.execute("PRAGMA journal_mode = WAL")  # outside a transaction, where SQLite allows it
        if version is None:
            with self._write() as conn:
                schema.create(conn)
        elif version < schema.SCHEMA_VERSION:
            with self._write() as conn:
                schema.upgrade(conn, self._progress)

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
        self._leases.release_all()

    # -- leases ------------------------------------------------------------------------------

    def lease(self, session_id: str, *, wait: float = 0.0) -> QuickLease:
        """Take `session_id`'s lease: its lock file beside the database (see `LeasingStore.lease`)."""
        self._check_open()
        return self._leases.add(locks.take(self._locks_folder, session_id, wait, self, self._leases.discard))

    # -- writes ------------------------------------------------------------------------------

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Persist a contiguous batch in one transaction; the first batch creates the session."""
        if not events:
            return
        batch = rows.Batch(header, events)
        with self._write() as conn:
            _append_batch(conn, batch, batch.lines())
        if self._unchecked_pages >= _CHECKPOINT_PAGES:
            self._checkpoint(conn)

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        """`append` on the calling thread, if it need not wait; whether it was done (see `QuickLeasingStore`).

        It declines a batch over `QUICK_EVENTS` events or `QUICK_BYTES` of log text, a write
        while another thread or process is writing, and any write once the log is due a
        checkpoint: those go to `append` on a worker thread, which checkpoints.
        """
        if not events:
            return True
        if len(events) > QUICK_EVENTS or self._unchecked_pages >= _CHECKPOINT_PAGES:
            return False
        batch = rows.Batch(header, events)
        lines = batch.lines()
        size = sum(map(len, lines))
        if size > QUICK_BYTES:
            return False
        try:
            with Transaction(self._quick_connection(), "BEGIN IMMEDIATE", self._write_lock, wait=False) as conn:
                _append_batch(conn, batch, lines)
                # Counted inside, under the write lock: a rough count of the log pages this wrote.
                self._unchecked_pages += size // _PAGE_BYTES + _PAGES_PER_COMMIT
        except WriterBusy:
            return False
        return True

    def _quick_connection(self) -> sqlite3.Connection:
        """The connection of quick writes (`append_now`); used only under the write lock."""
        self._check_open()
        if self._quick is None:
            self._quick = self._kept(connect_quick(self.path))
        return self._quick

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Copy the log's committed pages into the database file, as SQLite's automatic
        checkpoint would have at the quick writes' commits (which skip it)."""
        with self._write_lock:
            self._unchecked_pages = 0
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        """Store a whole, already validated log in one transaction (`replace` drops an existing one)."""
        batch = rows.Batch(header, events) if events else None
        with self._undriven(header.id) if replace else contextlib.nullcontext(), self._write() as conn:
            row = conn.execute("SELECT pk FROM sessions WHERE id = ?", (encode(header.id),)).fetchone()
            if row is not None:
                if not replace:
                    raise rows.already_exists(header.id)
                _delete(conn, row[0])
            pk = _insert_session(conn, header, None if batch is None else batch.title)
            if batch is not None:
                _write_events(conn, pk, batch, batch.lines(), 0, titled=True)

    def delete(self, session_id: str) -> bool:
        with self._undriven(session_id), self._write() as conn:
            row = conn.execute("SELECT pk FROM sessions WHERE id = ?", (encode(session_id),)).fetchone()
            if row is not None:
                _delete(conn, row[0])
        return row is not None

    def _undriven(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lock for a write that must not happen under a driver (SessionBusy if one drives it)."""
        return locks.held(self._locks_folder, session_id)

    # -- reads -------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionRow]:
        """Every stored session, newest first (ties by id), with its latest title and last activity."""
        return _session_rows(self._connection().execute(_LIST).fetchall())

    def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRow]:
        """At most `limit` stored sessions of the listing, from the first after `after` (see `SessionStore`)."""
        conn = self._connection()
        if after is None:
            listed = conn.execute(_FIRST_PAGE, {"limit": limit}).fetchall()
        else:
            listed = conn.execute(_PAGE_AFTER, {"at": after[0], "id": encode(after[1]), "limit": limit}).fetchall()
        return _session_rows(listed)

    def list_sessions_by_activity(
        self, limit: int, after: ActivityKey | None = None, cwd: str | None = None
    ) -> list[SessionRow]:
        """At most `limit` stored sessions, newest last activity first (see `SessionStore`)."""
        params: dict[str, object] = {"limit": limit}
        conditions = []
        if cwd is not None:
            conditions.append("cwd = :cwd")
            params["cwd"] = to_sqlite(cwd)
        if after is not None:
            conditions.append(_ACTIVE_AFTER)
            params.update(at=after[0], id=encode(after[1]))
        where = " AND ".join(conditions) or "true"
        return _session_rows(self._connection().execute(_BY_ACTIVITY.format(where), params).fetchall())

    def list_cwds(self) -> list[str]:
        """The distinct cwds of the stored sessions."""
        found = self._connection().execute(_DISTINCT_CWDS).fetchall()
        return [from_sqlite(cwd) for (cwd,) in found]

    def has(self, session_id: str) -> bool:
        row = self._connection().execute("SELECT 1 FROM sessions WHERE id = ?", (encode(session_id),)).fetchone()
        return row is not None

    def read_header(self, session_id: str) -> SessionHeader:
        (header_text,) = _session_row(self._connection(), session_id, "header")
        return rows.header_from_row(header_text, session_id)

    def read_title(self, session_id: str) -> StoredTitle | None:
        title, seq, time = _session_row(self._connection(), session_id, "title, title_seq, title_time")
        return None if title is None else StoredTitle(from_sqlite(title), seq, time)

    def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        cancel: threading.Event | None = None,
        group_by_cwd: bool = True,
    ) -> list[CandidateRow]:
        """Ranked sessions matching `query` by name or surface text (see `SessionStore.search_candidates`)."""
        return search.search(
            self._connection(),
            query,
            target_id=target_id,
            target_cwd=target_cwd,
            limit=limit,
            cancel=cancel,
            group_by_cwd=group_by_cwd,
        )

    def score_body_texts(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Each text's BM25 for `query` as this store's body search scores its own nodes.

        With the store's statistics as they are (see `dsh_host.store.relevance`); None while
        the store has indexed no text.
        """
        return relevance.score_texts(self._connection(), query, texts)

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read transaction."""
        with self._read() as conn:
            pk, header_text, next_seq = _session_row(conn, session_id, "pk, header, next_seq")
            lines = conn.execute(
                "SELECT e.line FROM surface AS s JOIN events AS e ON e.key = (s.session_pk << 32) | s.seq "
                "WHERE s.session_pk = ? ORDER BY s.ord",
                (pk,),
            ).fetchall()
        return rows.surface_snapshot(header_text, session_id, next_seq, lines)

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Header, last seq and each surface node's `SurfaceText` of several sessions, in order.

        One read transaction serves them all, so the sessions are observed at the same instant.
        """
        with self._read() as conn:
            return [_surface_texts(conn, session_id) for session_id in session_ids]

    def read_surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        """The newest `limit` readable surface entries before position `before`, with the session's
        header and latest title, in one read transaction.

        Positions are the surface rows' `ord`; the page reads its own rows along the primary key.
        """
        with self._read() as conn:
            pk, next_seq, header_text, title = _session_row(conn, session_id, "pk, next_seq, header, title")
            header = rows.header_from_row(header_text, session_id)

            def fetch(at: int | None, count: int) -> list[pages.NodeRow]:
                params = {"pk": pk, "before": _LAST_SEQ + 1 if at is None else at, "limit": count}
                return [
                    (ord_, seq, time, SurfaceText(kind, from_sqlite(source), from_sqlite(plugin), from_sqlite(text)))
                    for ord_, seq, time, kind, source, plugin, text in conn.execute(_SURFACE_PAGE, params)
                ]

            shown = None if title is None else from_sqlite(title)
            return pages.surface_page(header, shown, next_seq - 1 if next_seq else None, fetch, before, limit)

    def read_events_page(self, session_id: str, before_seq: int | None, limit: int) -> EventsPage:
        """The newest `limit` events before `before_seq`, in seq order, in one read transaction."""
        with self._read() as conn:
            pk, next_seq = _session_row(conn, session_id, "pk, next_seq")
            first, stop = pages.event_span(before_seq, limit, next_seq)
            lines = conn.execute(
                "SELECT line FROM events WHERE key >= ? AND key < ? ORDER BY key", (_key(pk, first), _key(pk, stop))
            ).fetchall()
        return pages.events_page(session_id, first, [line for (line,) in lines], next_seq)

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event line of a session, in seq order, in one read transaction."""
        with self._read() as conn:
            pk, header_text = _session_row(conn, session_id, "pk, header")
            lines = conn.execute(
                "SELECT line FROM events WHERE key BETWEEN ? AND ? ORDER BY key", (_key(pk, 0), _key(pk, _LAST_SEQ))
            ).fetchall()
        return rows.header_from_row(header_text, session_id), [line for (line,) in lines]

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        header, lines = self.read_lines(session_id)
        return header, rows.events_from_lines(lines)


# -- writing rows ----------------------------------------------------------------------------------


def _insert_session(conn: sqlite3.Connection, header: SessionHeader, title: rows.Title | None) -> int:
    # A new session's first batch usually carries its title: writing it with the row indexes
    # the name once, where a later UPDATE would re-index it.
    text, seq, time = title or (None, None, None)
    cursor = conn.execute(
        "INSERT INTO sessions (id, created_at, cwd, header, next_seq, next_ord, title, title_seq, title_time, "
        "last_activity_at) VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?, ?)",
        (
            encode(header.id),
            header.created_at,
            to_sqlite(header.cwd),
            rows.header_json(header),
            to_sqlite(text),
            seq,
            time,
            header.created_at,
        ),
    )
    pk = cursor.lastrowid
    assert pk is not None  # an INSERT's
    return pk


def _append_batch(conn: sqlite3.Connection, batch: rows.Batch, lines: list[str]) -> None:
    """Write `batch` (whose `lines()` are `lines`) after the stored session's last event, or as a new session."""
    header = batch.header
    row = conn.execute("SELECT pk, next_seq, next_ord FROM sessions WHERE id = ?", (encode(header.id),)).fetchone()
    if row is None:
        if batch.first != 0:
            raise batch.not_stored()
        pk = _insert_session(conn, header, batch.title)
        next_seq, next_ord = 0, 0
    else:
        pk, next_seq, next_ord = row
    batch.check_start(next_seq)
    _write_events(conn, pk, batch, lines, next_ord, titled=row is None)


def _write_events(
    conn: sqlite3.Connection, pk: int, batch: rows.Batch, lines: list[str], next_ord: int, *, titled: bool
) -> None:
    """Insert a batch's event rows (`lines` are its `lines()`), then update the surface and session rows.

    `titled`: the session row already holds the batch's title (it was created with it).
    """
    _insert_events(conn, _event_values(batch, lines, pk << _SEQ_BITS))
    next_ord = _write_surface(conn, pk, batch.nodes, next_ord)
    active = batch.events[-1].time
    if batch.title is None or titled:
        conn.execute(
            "UPDATE sessions SET next_seq = ?, next_ord = ?, last_activity_at = ? WHERE pk = ?",
            (batch.last + 1, next_ord, active, pk),
        )
    else:
        text, seq, time = batch.title
        conn.execute(
            "UPDATE sessions SET next_seq = ?, next_ord = ?, last_activity_at = ?, title = ?, title_seq = ?, "
            "title_time = ? WHERE pk = ?",
            (batch.last + 1, next_ord, active, to_sqlite(text), seq, time, pk),
        )


def _event_values(batch: rows.Batch, lines: list[str], base: int) -> list[object]:
    """The `events` rows' values, one row after another (key, type, line), keys from `base`."""
    kinds: list[Any] = batch.kinds  # str, or bytes once a lone surrogate is in one
    if not "".join(kinds).isascii():
        kinds = list(map(to_sqlite, kinds))  # a lone surrogate makes a type bytes
    values: list[object] = [None] * (3 * len(lines))
    values[0::3] = range(base | batch.first, base | (batch.last + 1))
    values[1::3] = kinds
    values[2::3] = lines
    return values


def _insert_events(conn: sqlite3.Connection, values: list[object]) -> None:
    """Insert event rows given as one flat list of their values (see `_event_values`)."""
    at, end = 0, len(values)
    for size, statement in _INSERT_EVENTS:
        while end - at >= 3 * size:
            conn.execute(statement, values[at : at + 3 * size])
            at += 3 * size
    if at < end:
        rest = values[at:]
        conn.executemany(_INSERT_EVENT, zip(rest[0::3], rest[1::3], rest[2::3], strict=True))


def _write_surface(conn: sqlite3.Connection, pk: int, nodes: Sequence[Event], next_ord: int) -> int:
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
            lo = conn.execute("SELECT ord FROM surface WHERE session_pk = ? AND seq = ?", (pk, op["start"])).fetchone()
            hi = conn.execute("SELECT ord FROM surface WHERE session_pk = ? AND seq = ?", (pk, op["end"])).fetchone()
            if lo is None or hi is None or lo[0] > hi[0]:
                raise rows.surface_disagrees(event)
            conn.execute("DELETE FROM surface WHERE session_pk = ? AND ord BETWEEN ? AND ?", (pk, lo[0], hi[0]))
            conn.execute(_INSERT_SURFACE, (pk, lo[0], event.seq, *surface_row))
    if raw_text:
        # Readers of the surface text then know to turn stored bytes back into text.
        conn.execute("UPDATE sessions SET raw_surface_text = 1 WHERE pk = ?", (pk,))
    return next_ord


def _surface_row(event: Event) -> tuple[str | bytes | None, ...]:
    """A surface node's (type, source_kind, source_plugin, text) columns."""
    text = surface_text(event.type, event.data)
    return (text.type, to_sqlite(text.source_kind), to_sqlite(text.source_plugin), to_sqlite(text.text))


def _delete(conn: sqlite3.Connection, pk: int) -> None:
    conn.execute("DELETE FROM events WHERE key BETWEEN ? AND ?", (_key(pk, 0), _key(pk, _LAST_SEQ)))
    conn.execute("DELETE FROM surface WHERE session_pk = ?", (pk,))
    conn.execute("DELETE FROM sessions WHERE pk = ?", (pk,))


# -- reading rows ----------------------------------------------------------------------------------


_ListedRow = tuple[bytes, int | float, str | bytes | None, str | bytes | None, int | float | None]
"""A listing query's row as sqlite3 returns it: id, created_at, cwd, title, last activity."""


def _session_rows(listed: list[_ListedRow]) -> list[SessionRow]:
    make = SessionRow._make
    return [
        make((sid.decode("utf-8", "surrogatepass"), created, from_sqlite(cwd), from_sqlite(title), active))
        for sid, created, cwd, title, active in listed
    ]


def _session_row(conn: sqlite3.Connection, session_id: str, columns: str) -> tuple[Any, ...]:
    """The named columns of a session's row; SessionNotFound when it is not stored."""
    row = conn.execute(f"SELECT {columns} FROM sessions WHERE id = ?", (encode(session_id),)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return cast("tuple[Any, ...]", row)


def _surface_texts(conn: sqlite3.Connection, session_id: str) -> SurfaceTexts:
    pk, header_text, next_seq, raw_text = _session_row(conn, session_id, "pk, header, next_seq, raw_surface_text")
    stored = conn.execute(
        "SELECT type, source_kind, source_plugin, text FROM surface WHERE session_pk = ? ORDER BY ord", (pk,)
    ).fetchall()
    # Text holding a lone surrogate is stored as UTF-8 bytes (see `to_sqlite`); all else is str.
    if raw_text:
        texts = [SurfaceText(kind, *map(from_sqlite, fields)) for kind, *fields in stored]
    else:
        texts = list(map(_surface_text_of, stored))
    return rows.surface_texts(header_text, session_id, next_seq, texts)
