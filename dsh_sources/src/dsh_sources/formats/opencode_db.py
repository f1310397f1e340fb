"""Reading OpenCode's database strictly read-only, while OpenCode may be writing it.

OpenCode keeps `opencode.db` in WAL mode: while it runs, committed transactions sit in
`opencode.db-wal` (indexed by `opencode.db-shm`) until a checkpoint copies them into the file,
and when its last connection closes it checkpoints and removes both. How SQLite opens such a file
decides what a reader creates and sees (measured with SQLite 3.40):

- `mode=ro` with the -wal and -shm present (OpenCode running) reads the committed WAL frames,
  takes only the WAL's read locks (OpenCode's writers never wait for it) and creates nothing;
- `mode=ro` with neither present creates both, and leaves them: so then the file is opened
  `immutable=1`, which reads the file alone, creates nothing and takes no lock (all that was
  committed is in the file then); should OpenCode start meanwhile, the file's signature moves
  and the read is done again;
- a -wal without its -shm (OpenCode was killed) holds committed frames that `immutable` would
  not see and `mode=ro` would create a -shm for: the file and its -wal are copied to a private
  temporary folder and the copy is read;
- a database in rollback mode (OpenCode's fallback where WAL is unsupported) is opened
  `mode=ro`, which creates nothing; there a reader's lock holds OpenCode's commits back, so
  each statement is its own short transaction instead of one for the whole read.

One window stays open: should OpenCode close and remove its -wal and -shm between the moment
they are seen and the read's first page (microseconds), SQLite would make them again.

Nothing is ever written: every connection is read-only. A locked, corrupt or unreadable
database is a `StoreRead` with a problem, never an error. The columns read are those of 1.2.0's
migrations (`id`, `parent_id`, `directory`, `title`, `time_created`, `time_updated` of `session`;
`id`, `session_id`, `time_created`, `data` of `message` and `part`): a column added later is
never needed, and a missing one reads as NULL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from dsh_sources.formats.opencode_projection import MessageInfo, SessionInfo, json_object, mark, project
from dsh_sources.lines import ReadCancelled
from dsh_sources.transcript import WHOLE, SessionRead, SessionSink, StoreRead, deal

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

BUSY_SECONDS = 2.0
"""How long a read waits for a lock it cannot have (a rollback-mode database being written)."""
ATTEMPTS = 3
"""Reads of a database that changed under an `immutable` read before one is taken as it is."""
_HEADER = b"SQLite format 3\x00"
_SESSION_COLUMNS = ("id", "parent_id", "directory", "title", "time_created", "time_updated")


_MESSAGES = "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id"
_PARTS = (
    "SELECT m.id, p.data FROM part AS p LEFT JOIN message AS m ON m.id = p.message_id AND m.session_id = p.session_id "
    "WHERE p.session_id = ? {shown}ORDER BY m.time_created, m.id, p.id"
)
"""A session's parts in its messages' order (`_MESSAGES`), each with its message's id; those of no message of
the session first, with none."""
_SHOWN = (
    "AND CASE WHEN typeof(p.data) != 'text' OR NOT json_valid(p.data) OR json_type(p.data) != 'object' THEN 1 "
    "ELSE json_extract(p.data, '$.type') IN ('text', 'compaction') END "
)
"""The parts that may show (and those that are no JSON object, to count): tool output, reasoning and the
other kinds never shown hold most of a database's bytes, and SQLite passes over them without Python
parsing them. CASE keeps the order: a value is typed and validated before its JSON is looked into."""


class Unreadable(Exception):
    """The database cannot be read now (the message says why, in a few words)."""


def signature(path: str) -> tuple[int, ...] | None:
    """The database's identity, size and mtime, and its -wal's size and mtime (0s when absent); None when gone."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(path + "-wal")
        wal_size, wal_mtime = wal.st_size, wal.st_mtime_ns
    except OSError:
        wal_size = wal_mtime = 0
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, wal_size, wal_mtime)


def _uri(path: str, options: str) -> str:
    return "file:" + quote(os.path.abspath(path)) + "?" + options


def _in_wal_mode(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError as error:
        raise Unreadable(error.strerror or "cannot be opened") from None
    if header and (len(header) < 100 or not header.startswith(_HEADER)):
        raise Unreadable("not a SQLite database")  # empty, it is a database with no table yet
    return bool(header) and (header[18] == 2 or header[19] == 2)


IMMUTABLE, SNAPSHOT, ROLLBACK = "immutable", "snapshot", "rollback"
"""How a database was opened: the file alone, without locks; with its WAL (or a copy), read in one
transaction; in rollback mode, read a statement at a time."""


@contextlib.contextmanager
def open_read_only(path: str) -> Iterator[tuple[sqlite3.Connection, str]]:
    """A read-only connection to the database that creates no file beside it, and how it was opened."""
    wal = os.path.exists(path + "-wal")
    shm = os.path.exists(path + "-shm")
    in_wal_mode = _in_wal_mode(path)
    if in_wal_mode and not (wal and shm):
        if not wal:
            with _connect(_uri(path, "mode=ro&immutable=1")) as conn:
                yield conn, IMMUTABLE
            return
        with tempfile.TemporaryDirectory(prefix="dsh-opencode-") as folder:
            copy = os.path.join(folder, "copy.db")
            try:
                shutil.copyfile(path, copy)
                shutil.copyfile(path + "-wal", copy + "-wal")
            except OSError as error:
                raise Unreadable(error.strerror or "cannot be copied") from None
            with _connect(_uri(copy, "mode=ro")) as conn:
                yield conn, SNAPSHOT
        return
    with _connect(_uri(path, "mode=ro")) as conn:
        yield conn, SNAPSHOT if in_wal_mode else ROLLBACK


@contextlib.contextmanager
def _connect(uri: str) -> Iterator[sqlite3.Connection]:
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as error:
        raise Unreadable(str(error)) from None
    try:
        yield conn
    finally:
        conn.close()


def read_database(
    path: str,
    marks: Mapping[str, str],
    sink: SessionSink,
    cancel: threading.Event | None = None,
    share: tuple[int, int] = WHOLE,
) -> StoreRead:
    """Every root session's mark, and each session whose mark is not the one in `marks` (of those `share`
    deals this read, weighed by their rows) read again into `sink`."""
    read: StoreRead | None = None
    for _ in range(ATTEMPTS):
        before = signature(path)
        try:
            with open_read_only(path) as (conn, opened):
                read = _read(conn, path, before, marks, sink, cancel, share, whole=opened != ROLLBACK)
        except Unreadable as error:
            return StoreRead(path, before, {}, problem=str(error))
        except sqlite3.Error as error:
            return StoreRead(path, before, {}, problem=str(error) or type(error).__name__)
        if opened != IMMUTABLE or signature(path) == before:
            break  # an immutable read of a file that changed meanwhile may be torn: read it again
    assert read is not None
    return read


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _read(
    conn: sqlite3.Connection,
    path: str,
    seen: tuple[int, ...] | None,
    marks: Mapping[str, str],
    sink: SessionSink,
    cancel: threading.Event | None,
    share: tuple[int, int],
    *,
    whole: bool,
) -> StoreRead:
    """The read, in one transaction when `whole` (one consistent snapshot), else a statement at a time."""
    if whole:
        conn.execute("BEGIN")
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"session", "message", "part"} <= tables:
            return StoreRead(path, seen, {})  # OpenCode has not made its tables yet: no session
        have = _columns(conn, "session")
        columns = ", ".join(name if name in have else f"NULL AS {name}" for name in _SESSION_COLUMNS)
        counts = {
            sid: (count, newest, size)
            for sid, count, newest, size in conn.execute(
                "SELECT session_id, count(*), max(time_updated), total(length(data)) FROM message GROUP BY session_id"
            )
        }
        parts = {
            sid: (count, last)
            for sid, count, last in conn.execute(
                "SELECT session_id, count(*), max(rowid) FROM part GROUP BY session_id"
            )
        }
        skipped = 0
        now: dict[str, str] = {}
        moved: list[SessionInfo] = []
        for row in conn.execute(f"SELECT {columns} FROM session").fetchall():
            session = _session(row)
            if session is None:
                skipped += 1
                continue
            if session.parent is not None:
                continue  # a subagent's task, shown in its parent's conversation, not listed
            now[session.id] = mark(row, counts.get(session.id), parts.get(session.id))
            if marks.get(session.id) != now[session.id]:
                moved.append(session)
        weights = [(s.id, (counts.get(s.id) or (0,))[0] + (parts.get(s.id) or (0,))[0]) for s in moved]
        mine = deal(weights, share)
        for session in moved:
            if session.id not in mine:
                continue
            if cancel is not None and cancel.is_set():
                raise ReadCancelled
            messages = _Messages(conn, session.id, cancel)
            facts, said = project(session, messages)
            sink(SessionRead(session.id, now[session.id], facts, said, messages.bad))
    finally:
        if whole:
            conn.execute("COMMIT")
    return StoreRead(path, seen, now, skipped)


def _session(row: tuple[object, ...]) -> SessionInfo | None:
    sid, *rest = row
    return SessionInfo.of(sid, *rest) if isinstance(sid, str) and sid else None


class _Messages:
    """A session's messages with their shown parts, in OpenCode's order, read a message at a time.

    Two cursors go through the session together: its messages in (time_created, id) order and
    its parts sorted the same way by their message, so a message's parts come as it does and
    nothing else of the session is held. `bad` counts the rows of the last pass that were left out;
    a set `cancel` stops the pass before the next message (`ReadCancelled`).
    """

    def __init__(self, conn: sqlite3.Connection, session: str, cancel: threading.Event | None) -> None:
        self.conn = conn
        self.session = session
        self.cancel = cancel
        self.bad = 0

    def __call__(self) -> Iterator[MessageInfo]:
        self.bad = 0
        try:
            parts = self.conn.execute(_PARTS.format(shown=_SHOWN), (self.session,))
        except sqlite3.OperationalError:  # a SQLite without JSON functions: every part is parsed here
            parts = self.conn.execute(_PARTS.format(shown=""), (self.session,))
        pending = next(parts, None)
        while pending is not None and pending[0] is None:  # parts of no message of the session
            self._part(pending[1])
            pending = next(parts, None)
        for message_id, created, data in self.conn.execute(_MESSAGES, (self.session,)):
            if self.cancel is not None and self.cancel.is_set():
                raise ReadCancelled
            shown: list[dict[str, JsonValue]] = []
            while pending is not None and pending[0] == message_id:
                part = self._part(pending[1])
                if part is not None:
                    shown.append(part)
                pending = next(parts, None)
            info = json_object(data)
            if info is None or not isinstance(message_id, str):
                self.bad += 1
                continue
            yield MessageInfo(message_id, created if type(created) is int else 0, info, shown)
        while pending is not None:
            self._part(pending[1])
            pending = next(parts, None)

    def _part(self, data: object) -> dict[str, JsonValue] | None:
        part = json_object(data)
        if part is None:
            self.bad += 1
        return part
