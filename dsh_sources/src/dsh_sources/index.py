"""The index of the agents' files: what dsh read of each, and the sessions projected from them.

One SQLite file, `sources/index.sqlite3` in dsh's data dir (the folder 0700, every file in it
0600 whatever the umask), serves every source of this distribution:

- `files`: per source and file, the file's identity (device, inode) and the size and mtime it
  had when read, how far it was read (`offset`: through the last whole line), fingerprints of
  its head and of the bytes just before the offset, the projector's state (JSON) and the counts
  of lines it could not read. `generation` counts the writes of a file's entry, so that a write
  computed from an older entry is refused instead of applied over a newer one.
- `sessions`: the session each file holds (the agent's id, cwd, times, title, message count).
- `messages`: each session's current conversation, under rowid `(session pk << 20) | position`;
  `texts` a full-text index (FTS5, the tokenizer the SQLite store uses) of the same messages.
- `nodes`: records other records point at (Claude Code's uuids), with their place on the
  current chain, so a grown file's new records find where they join.
- `builds`: how far each source's build has come, for processes that did not start it.

`PRAGMA user_version` is the schema's version and `sources.projection` each source's projection
version: a source whose rules changed has its files read again. The index of earlier versions
(`sources.sqlite3` beside the folder) held no read state and is removed on open. Only this
folder is ever written: the agents' folders are opened for reading, nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from dsh_host import SearchCancelled
from dsh_host.files import private_file, private_folder, withdraw_exposure
from dsh_host.sources import IndexProgress, SourceMessage
from dsh_host.text import has_surrogate
from dsh_sources.spill import NodeSpill, select_rows, sweep
from dsh_sources.transcript import Facts, Node, Said, SessionRead, StoreRead, Update

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json, JsonValue

MessageRow = tuple[int, str, int, str, str, "str | None", int, str, "str | bytes"]
"""A message as the index stores it: position, role, time, source, model, stream, turn, texts, search text."""
FileValues = tuple[int, int, int, int, int, int, bytes, bytes, str, int, int, int, int]
"""A read's values for `files`, from `dev` to `keyed`."""

INDEX_DIR = "sources"
INDEX_FILE = "index.sqlite3"
LEGACY_FILE = "sources.sqlite3"
SCHEMA_VERSION = 2
TOKENIZER = "unicode61 remove_diacritics 2"
ORD_BITS = 20
_BUSY_MS = 30_000
_PROGRESS_STEPS = 2_000
_BATCH = 500
_FILE_COLUMNS = (
    "SELECT pk, path, dev, ino, size, mtime_ns, offset, head_len, head, tail, generation, skipped, oversized, keyed "
)
_STAMP = "UPDATE sources SET stamp = stamp + 1 WHERE name = ?"
_INSERT_NODE = "INSERT OR REPLACE INTO nodes (file, key, parent, says, at, msgs, blocks) VALUES (?, ?, ?, ?, ?, ?, ?)"
_INSERT_SESSION = (
    "INSERT INTO sessions (pk, file, agent_id, cwd, created_at, updated_at, title, messages) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (rowid, role, time, source, model, stream, turn, texts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_TEXT = "INSERT INTO texts (rowid, text) VALUES (?, ?)"
_USER_SOURCE = json.dumps({"kind": "user"}, separators=(",", ":"))
# The best-ranked message of each session: SQLite gives a bare column the row its min() came from.
_BEST_PER_SESSION = (
    f"SELECT rowid, min(rank) FROM (SELECT rowid, rank FROM texts WHERE texts MATCH ?) GROUP BY rowid >> {ORD_BITS}"
)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sources (
    name TEXT PRIMARY KEY,
    projection INTEGER NOT NULL,
    stamp INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS files (
    pk INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    path BLOB NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    head_len INTEGER NOT NULL,
    head BLOB NOT NULL,
    tail BLOB NOT NULL,
    state TEXT,
    skipped INTEGER NOT NULL DEFAULT 0,
    oversized INTEGER NOT NULL DEFAULT 0,
    unfinished INTEGER NOT NULL DEFAULT 0,
    keyed INTEGER NOT NULL DEFAULT 1,
    generation INTEGER NOT NULL DEFAULT 1,
    UNIQUE (source, path)
);
CREATE TABLE IF NOT EXISTS sessions (
    pk INTEGER PRIMARY KEY,
    file INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    cwd BLOB,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    title BLOB,
    messages INTEGER NOT NULL,
    UNIQUE (file, agent_id)
);
CREATE INDEX IF NOT EXISTS sessions_by_agent_id ON sessions (agent_id);
CREATE TABLE IF NOT EXISTS messages (
    rowid INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    time INTEGER NOT NULL,
    source TEXT NOT NULL,
    model TEXT NOT NULL,
    stream TEXT,
    turn INTEGER NOT NULL,
    texts TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(text, tokenize = '{TOKENIZER}');
CREATE TABLE IF NOT EXISTS nodes (
    file INTEGER NOT NULL,
    key TEXT NOT NULL,
    parent TEXT,
    says INTEGER NOT NULL,
    at INTEGER,
    msgs INTEGER NOT NULL,
    blocks INTEGER NOT NULL,
    PRIMARY KEY (file, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodes_on_chain ON nodes (file, at) WHERE at IS NOT NULL;
CREATE TABLE IF NOT EXISTS builds (
    source TEXT PRIMARY KEY,
    files_done INTEGER NOT NULL,
    files_total INTEGER NOT NULL,
    bytes_done INTEGER NOT NULL,
    bytes_total INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    running INTEGER NOT NULL,
    updated REAL NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Observed:
    """A file as a read saw it: identity, size and mtime, how far it was read, and the fingerprints.

    `offset` is the end of the last whole line read; `head` the digest of the first `head_len`
    bytes and `tail` that of the bytes just before the offset (see `reading`).
    """

    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int
    head_len: int
    head: bytes
    tail: bytes


@dataclass(frozen=True)
class FileEntry:
    """What the index knows of one file (its state is loaded only when the file is read on)."""

    pk: int
    path: str
    seen: Observed
    generation: int
    skipped: int
    oversized: int
    keyed: bool
    """Whether the index kept the file's record keys (`Node`s), which reading on from the offset needs."""


@dataclass(frozen=True)
class FileRead:
    """The result of reading a file (from its start when `fresh`, else on from its offset)."""

    path: str
    seen: Observed
    fresh: bool
    skipped: int
    oversized: int
    unfinished: bool
    update: Update
    generation: int | None
    """The entry's generation the read went on from (None: there was no entry)."""
    keyed: bool = True
    rows: tuple[MessageRow, ...] | None = None
    """`update.tail` as the index's rows (`message_rows`), when made beforehand (by a worker process)."""


@dataclass(frozen=True)
class SessionEntry:
    """An indexed session: its row and the file it is read from."""

    pk: int
    file: int
    path: str
    agent_id: str
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


def _searchable(text: str) -> str | bytes:
    return text if text.isascii() or not has_surrogate(text) else text.encode("utf-8", "surrogatepass")


def index_path(data_dir: Path) -> Path:
    """Where the index of a data dir lives."""
    return data_dir / INDEX_DIR / INDEX_FILE


class SourceIndex:
    """One source's part of the shared index file; safe to use from several threads."""

    def __init__(self, path: Path, source: str, projection: int) -> None:
        self.path = path
        self.source = source
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        private_folder(path.parent)
        private_file(path)
        for own in (path.parent, path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(FileNotFoundError):
                withdraw_exposure(own)  # the folder is dsh's own: an older, looser one is tightened
        conn = self._connection()
        if not _current(conn, source, projection):
            self._upgrade(conn, projection)
        legacy = path.parent.parent / LEGACY_FILE
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{legacy}{suffix}")
        sweep(path.parent, process_alive)  # spills of reads whose process was killed

    def _upgrade(self, conn: sqlite3.Connection, projection: int) -> None:
        """Bring the schema to this version and the source's entries to this projection (a write)."""
        source = self.source
        with self._transaction(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    if not name.startswith("texts_") and not name.startswith("sqlite_"):
                        conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            stored = conn.execute("SELECT projection FROM sources WHERE name = ?", (source,)).fetchone()
            if stored is None or stored[0] != projection:
                self._forget_files(
                    conn, [pk for (pk,) in conn.execute("SELECT pk FROM files WHERE source = ?", (source,))]
                )
                conn.execute("INSERT OR REPLACE INTO sources (name, projection) VALUES (?, ?)", (source, projection))

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

    def release(self) -> None:
        """Close the calling thread's connection, if it has one (a thread that used the index and ends calls it)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            with self._lock:
                self._connections.remove(conn)
            conn.close()

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

    # -- files -------------------------------------------------------------------------------

    def files(self) -> dict[str, FileEntry]:
        """Every file indexed for this source, by path."""
        rows = self._connection().execute(
            _FILE_COLUMNS + "FROM files WHERE source = ?",
            (self.source,),
        )
        return {os.fsdecode(row[1]): _file_entry(row) for row in rows}

    def file(self, path: str) -> FileEntry | None:
        """One file's entry."""
        row = (
            self._connection()
            .execute(
                _FILE_COLUMNS + "FROM files WHERE source = ? AND path = ?",
                (self.source, os.fsencode(path)),
            )
            .fetchone()
        )
        return None if row is None else _file_entry(row)

    def state(self, pk: int) -> Json | None:
        """The projector's state of a file (None when it has none)."""
        row = self._connection().execute("SELECT state FROM files WHERE pk = ?", (pk,)).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def stored(self, pk: int) -> StoredFile:
        """What the index holds of a file, for a projector that goes on from its state."""
        return StoredFile(self, pk)

    def put(self, reads: Iterable[FileRead]) -> list[str]:
        """Write what reading each file found; the paths whose entry changed meanwhile.

        One transaction writes them, or one per `ATTACHED_SPILLS` reads that spilled their nodes.
        A read that went on from an entry another write has replaced since is not applied: its
        path is returned, to be read again.
        """
        reads = list(reads)
        try:
            stale: list[str] = []
            for group in _spill_groups(reads):
                stale.extend(self._put_all(group))
            return stale
        finally:
            for read in reads:
                if isinstance(read.update.nodes, NodeSpill):
                    read.update.nodes.discard()

    def _put_all(self, reads: list[FileRead]) -> list[str]:
        conn = self._connection()
        stale: list[str] = []
        spills = [read.update.nodes for read in reads if isinstance(read.update.nodes, NodeSpill)]
        with _attached(conn, spills) as schemas, self._transaction(conn):
            known: set[bytes] = set()
            for start in range(0, len(reads), _BATCH):
                paths = [os.fsencode(read.path) for read in reads[start : start + _BATCH]]
                marks = ",".join("?" * len(paths))
                sql = f"SELECT path FROM files WHERE source = ? AND path IN ({marks})"
                known.update(path for (path,) in conn.execute(sql, (self.source, *paths)))
            first_seen: list[FileRead] = []
            for read in reads:
                if os.fsencode(read.path) in known:
                    if not self._put(conn, read, schemas):
                        stale.append(read.path)
                elif read.fresh:
                    first_seen.append(read)
                else:  # read on from an entry that is gone meanwhile
                    stale.append(read.path)
            self._put_first_seen(conn, first_seen, schemas)
            conn.execute(_STAMP, (self.source,))
        return stale

    def _put_first_seen(self, conn: sqlite3.Connection, reads: list[FileRead], schemas: Mapping[str, str]) -> None:
        """Write reads of files the index has no entry for, a statement per table for them all.

        `schemas` names the attached spill of each read that spilled its nodes, by the spill's path.
        """
        if not reads:
            return
        next_file = (conn.execute("SELECT max(pk) FROM files").fetchone()[0] or 0) + 1
        next_session = (conn.execute("SELECT max(pk) FROM sessions").fetchone()[0] or 0) + 1
        files: list[tuple[object, ...]] = []
        sessions: list[tuple[object, ...]] = []
        nodes: list[tuple[object, ...]] = []
        spilled: list[tuple[int, NodeSpill]] = []
        messages: list[tuple[object, ...]] = []
        texts: list[tuple[int, str | bytes]] = []
        for file, read in enumerate(reads, next_file):
            files.append((file, self.source, os.fsencode(read.path), *_file_values(read)))
            if isinstance(read.update.nodes, NodeSpill):
                spilled.append((file, read.update.nodes))  # copied from its file below, never in memory
            else:
                nodes.extend(_node_values(file, read.update.nodes))
            facts = read.update.facts
            if facts is None:
                continue
            sessions.append(_session_values(next_session, file, facts))
            session_messages, session_texts = _message_values(
                next_session << ORD_BITS, _read_rows(read), room=1 << ORD_BITS
            )
            messages.extend(session_messages)
            texts.extend(session_texts)
            next_session += 1
        conn.executemany(
            "INSERT INTO files (pk, source, path, dev, ino, size, mtime_ns, offset, head_len, head, tail, state, "
            "skipped, oversized, unfinished, keyed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            files,
        )
        conn.executemany(_INSERT_SESSION, sessions)
        conn.executemany(_INSERT_NODE, nodes)
        for file, spill in spilled:
            _copy_nodes(conn, file, spill, schemas)
        conn.executemany(_INSERT_MESSAGE, messages)
        conn.executemany(_INSERT_TEXT, texts)

    def stamp(self) -> int:
        """A number that changes whenever this source's part of the index is written (by any process)."""
        row = self._connection().execute("SELECT stamp FROM sources WHERE name = ?", (self.source,)).fetchone()
        return 0 if row is None else int(row[0])

    def _put(self, conn: sqlite3.Connection, read: FileRead, schemas: Mapping[str, str]) -> bool:
        """Write a read of a file the index has an entry for (False: the entry changed since the read began)."""
        pk, generation = conn.execute(
            "SELECT pk, generation FROM files WHERE source = ? AND path = ?", (self.source, os.fsencode(read.path))
        ).fetchone()
        if not read.fresh and generation != read.generation:
            return False  # a read from the start holds all it needs; one that went on needs its entry unchanged
        if read.fresh:
            self._forget_files(conn, [pk], keep_file=True)
        conn.execute(
            "UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, offset = ?, head_len = ?, head = ?, "
            "tail = ?, state = ?, skipped = ?, oversized = ?, unfinished = ?, keyed = ?, "
            "generation = generation + 1 WHERE pk = ?",
            (*_file_values(read), pk),
        )
        update = read.update
        facts = update.facts
        row = conn.execute("SELECT pk, agent_id FROM sessions WHERE file = ?", (pk,)).fetchone()
        if row is not None and (facts is None or facts.agent_id != row[1]):
            self._forget_session(conn, row[0])
            row = None
        if update.cut is not None:
            conn.execute("UPDATE nodes SET at = NULL WHERE file = ? AND at > ?", (pk, update.cut))
        if isinstance(update.nodes, NodeSpill):
            _copy_nodes(conn, pk, update.nodes, schemas)
        else:
            conn.executemany(_INSERT_NODE, _node_values(pk, update.nodes))
        if facts is None:
            return True
        if row is None:
            session = (conn.execute("SELECT max(pk) FROM sessions").fetchone()[0] or 0) + 1
            conn.execute(_INSERT_SESSION, _session_values(session, pk, facts))
        else:
            session = row[0]
            conn.execute(
                "UPDATE sessions SET cwd = ?, created_at = ?, updated_at = ?, title = ?, messages = ? WHERE pk = ?",
                (*_session_values(session, pk, facts)[3:], session),
            )
        first = (session << ORD_BITS) + update.keep
        last = ((session + 1) << ORD_BITS) - 1
        conn.execute("DELETE FROM messages WHERE rowid BETWEEN ? AND ?", (first, last))
        conn.execute("DELETE FROM texts WHERE rowid BETWEEN ? AND ?", (first, last))
        messages, texts = _message_values(first, _read_rows(read), room=(1 << ORD_BITS) - update.keep)
        conn.executemany(_INSERT_MESSAGE, messages)
        conn.executemany(_INSERT_TEXT, texts)
        return True

    # -- stores: many sessions in one file ----------------------------------------------------

    def store_state(self, path: str) -> Json | None:
        """What the last `put_store` of `path` recorded (signature, marks, skipped, problem), or None."""
        entry = self.file(path)
        return None if entry is None else self.state(entry.pk)

    def put_store_sessions(self, path: str, sessions: Sequence[tuple[SessionRead, Sequence[MessageRow]]]) -> None:
        """Write sessions a read of the store `path` handed over (each with its messages as `message_rows`).

        The store is one row of `files` (its `state` holds the last read's signature, marks, skipped
        counts and problem) and each of its sessions a row of `sessions` keyed by (file, agent id).
        Each session written replaces the one of its agent id, and the store's recorded mark and
        skipped count of it become its own; the store's signature is forgotten until `put_store`
        ends the read. So a read interrupted after this is taken up where it stopped: these
        sessions are not read again, the others are.
        """
        conn = self._connection()
        with self._transaction(conn):
            file, state = self._store_entry(conn, path)
            marks, skipped = _entries(state.get("marks")), _entries(state.get("skipped"))
            next_session = (conn.execute("SELECT max(pk) FROM sessions").fetchone()[0] or 0) + 1
            for session, (read, rows) in enumerate(sessions, next_session):
                held = conn.execute(
                    "SELECT pk FROM sessions WHERE file = ? AND agent_id = ?", (file, read.agent_id)
                ).fetchone()
                if held is not None:
                    self._forget_session(conn, held[0])
                conn.execute(_INSERT_SESSION, _session_values(session, file, read.facts))
                messages, texts = _message_values(session << ORD_BITS, rows, room=1 << ORD_BITS)
                conn.executemany(_INSERT_MESSAGE, messages)
                conn.executemany(_INSERT_TEXT, texts)
                marks[read.agent_id] = read.mark
                if read.skipped:
                    skipped[read.agent_id] = read.skipped
                else:
                    skipped.pop(read.agent_id, None)
            written = {**state, "signature": None, "marks": marks, "skipped": skipped}
            conn.execute("UPDATE files SET state = ? WHERE pk = ?", (_state_json(written), file))
            conn.execute(_STAMP, (self.source,))

    def put_store(self, read: StoreRead) -> None:
        """End a read of a store (its sessions read again were written by `put_store_sessions`).

        Records the read's signature, marks and skipped count, and drops the sessions no longer in
        its marks. A read with a problem changes only the recorded problem (and forgets the
        signature, so the next check reads it again): the sessions it handed over before it met
        the problem are written, every other one stays as it was.
        """
        conn = self._connection()
        with self._transaction(conn):
            file, before = self._store_entry(conn, read.path)
            signature = None if read.problem is not None else read.signature
            if read.problem is not None:
                state: Json = {**before, "signature": None, "problem": read.problem}
            else:
                held_skipped = _entries(before.get("skipped"))
                skipped = {held: count for held, count in held_skipped.items() if held and held in read.marks}
                if read.skipped:
                    skipped[""] = read.skipped
                state = {"signature": signature, "marks": read.marks, "skipped": skipped, "problem": None}
                held = conn.execute("SELECT agent_id, pk FROM sessions WHERE file = ?", (file,)).fetchall()
                for agent_id, session in held:
                    if agent_id not in read.marks:
                        self._forget_session(conn, session)
            dev, ino, size, mtime_ns = (*(signature or ())[:4], 0, 0, 0, 0)[:4]
            conn.execute(
                "UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, state = ?, "
                "generation = generation + 1 WHERE pk = ?",
                (dev, ino, size, mtime_ns, _state_json(state), file),
            )
            conn.execute(_STAMP, (self.source,))

    def _store_entry(self, conn: sqlite3.Connection, path: str) -> tuple[int, Json]:
        """The store's row of `files` (made, with an empty state, when it has none) and its state."""
        row = conn.execute(
            "SELECT pk, state FROM files WHERE source = ? AND path = ?", (self.source, os.fsencode(path))
        ).fetchone()
        if row is not None:
            return row[0], json.loads(row[1]) if row[1] else {}
        file = (conn.execute("SELECT max(pk) FROM files").fetchone()[0] or 0) + 1
        conn.execute(
            "INSERT INTO files (pk, source, path, dev, ino, size, mtime_ns, offset, head_len, head, tail, "
            "state, keyed) VALUES (?, ?, ?, 0, 0, 0, 0, 0, 0, x'', x'', '{}', 0)",
            (file, self.source, os.fsencode(path)),
        )
        return file, {}

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the entries of files that are gone."""
        conn = self._connection()
        with self._transaction(conn):
            pks = []
            for path in paths:
                row = conn.execute(
                    "SELECT pk FROM files WHERE source = ? AND path = ?", (self.source, os.fsencode(path))
                ).fetchone()
                if row is not None:
                    pks.append(row[0])
            self._forget_files(conn, pks)
            conn.execute(_STAMP, (self.source,))

    def _forget_files(self, conn: sqlite3.Connection, pks: list[int], *, keep_file: bool = False) -> None:
        for pk in pks:
            for (session,) in conn.execute("SELECT pk FROM sessions WHERE file = ?", (pk,)).fetchall():
                self._forget_session(conn, session)
            conn.execute("DELETE FROM nodes WHERE file = ?", (pk,))
            if not keep_file:
                conn.execute("DELETE FROM files WHERE pk = ?", (pk,))

    def _forget_session(self, conn: sqlite3.Connection, session: int) -> None:
        first, last = session << ORD_BITS, ((session + 1) << ORD_BITS) - 1
        conn.execute("DELETE FROM messages WHERE rowid BETWEEN ? AND ?", (first, last))
        conn.execute("DELETE FROM texts WHERE rowid BETWEEN ? AND ?", (first, last))
        conn.execute("DELETE FROM sessions WHERE pk = ?", (session,))

    # -- builds ------------------------------------------------------------------------------

    def record_build(self, progress: IndexProgress) -> None:
        """Say how far this process's build of the source has come (for other processes to read)."""
        conn = self._connection()
        with self._transaction(conn):
            conn.execute(
                "INSERT OR REPLACE INTO builds (source, files_done, files_total, bytes_done, bytes_total, pid, "
                "running, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.source,
                    progress.files_done,
                    progress.files_total,
                    progress.bytes_done,
                    progress.bytes_total,
                    os.getpid(),
                    int(progress.building),
                    time.time(),
                ),
            )

    def recorded_build(self) -> IndexProgress | None:
        """The progress the last build of the source recorded, or None."""
        row = (
            self._connection()
            .execute(
                "SELECT files_done, files_total, bytes_done, bytes_total, running, pid FROM builds WHERE source = ?",
                (self.source,),
            )
            .fetchone()
        )
        if row is None:
            return None
        done, total, bytes_done, bytes_total, running, pid = row
        if running and pid != os.getpid() and not process_alive(pid):
            running = 0  # its builder was killed: what it committed stays, the next build goes on
        return IndexProgress(done, total, bytes_done, bytes_total, bool(running), not running and done >= total)

    # -- reads -------------------------------------------------------------------------------

    def sessions(self) -> list[SessionEntry]:
        """Every indexed session of this source."""
        rows = self._connection().execute(
            "SELECT s.pk, s.file, f.path, s.agent_id, s.cwd, s.created_at, s.updated_at, s.title, s.messages "
            "FROM sessions s JOIN files f ON f.pk = s.file WHERE f.source = ?",
            (self.source,),
        )
        return [_session(row) for row in rows]

    def sessions_of(self, agent_id: str) -> list[SessionEntry]:
        """The indexed sessions (one per file) the agent calls `agent_id`."""
        rows = self._connection().execute(
            "SELECT s.pk, s.file, f.path, s.agent_id, s.cwd, s.created_at, s.updated_at, s.title, s.messages "
            "FROM sessions s JOIN files f ON f.pk = s.file WHERE s.agent_id = ? AND f.source = ?",
            (agent_id, self.source),
        )
        return [_session(row) for row in rows]

    def messages(self, session: int, start: int = 0, stop: int = 1 << ORD_BITS) -> list[Said]:
        """A session's stored messages from `start` up to `stop`."""
        base = session << ORD_BITS
        rows = self._connection().execute(
            "SELECT role, time, source, model, stream, texts FROM messages WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
            (base + start, base + stop - 1),
        )
        return [_said(row) for row in rows]

    def reports(self, agent_id: str | None = None) -> list[tuple[str, str | None, int, int]]:
        """(path, agent id, skipped, oversized) of the files whose reads left lines out."""
        sql = (
            "SELECT f.path, s.agent_id, f.skipped + f.unfinished, f.oversized FROM files f "
            "LEFT JOIN sessions s ON s.file = f.pk WHERE f.source = ? AND f.skipped + f.unfinished > 0"
        )
        params: tuple[object, ...] = (self.source,)
        if agent_id is not None:
            sql, params = sql + " AND s.agent_id = ?", (*params, agent_id)
        rows = self._connection().execute(sql + " ORDER BY f.path", params)
        return [(os.fsdecode(path), agent, skipped, over) for path, agent, skipped, over in rows]

    def size(self) -> int:
        """The index file's size in bytes (its write-ahead log included)."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def body_matches(self, match: str, cancel: threading.Event | None) -> Iterator[tuple[int, int, float]]:
        """(session pk, text rowid, BM25 rank) of the best message matching `match` of each session.

        The full-text index holds every source's messages, and ranking the matches is most of a
        query's cost: the sources of one index file share each query's answer (`_SHARED`) while
        nothing is written, so searching four sources costs one query, not four.
        """
        for rowid, rank in _SHARED.matches(self, match, cancel):
            yield rowid >> ORD_BITS, rowid, rank

    def _ranked(self, match: str, cancel: threading.Event | None) -> list[tuple[int, float]]:
        """Every session's best matching message (rowid, rank), over every source of the file."""
        conn = self._connection()
        if cancel is not None:
            conn.set_progress_handler(cancel.is_set, _PROGRESS_STEPS)
        try:
            return conn.execute(_BEST_PER_SESSION, (match,)).fetchall()
        except sqlite3.OperationalError:
            if cancel is not None and cancel.is_set():
                raise SearchCancelled("candidate search was cancelled") from None
            raise
        finally:
            if cancel is not None:
                conn.set_progress_handler(None, 0)

    def written(self) -> str:
        """What changes whenever any source of the file is written (by any process)."""
        rows = self._connection().execute("SELECT name, stamp FROM sources ORDER BY name").fetchall()
        return ",".join(f"{name}:{stamp}" for name, stamp in rows)

    def texts(self, rowids: list[int]) -> dict[int, str]:
        """The indexed text of each message, by rowid."""
        conn = self._connection()
        out: dict[int, str] = {}
        for start in range(0, len(rowids), _BATCH):
            batch = rowids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            for rowid, text in conn.execute(f"SELECT rowid, text FROM texts WHERE rowid IN ({marks})", batch):
                out[rowid] = _text(text) or ""
        return out


class _SharedMatches:
    """The latest full-text answers of each index file in this process, reused while the file is unwritten."""

    KEPT = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[tuple[Path, str], tuple[str, list[tuple[int, float]]]] = {}
        self._pending: dict[tuple[Path, str], threading.Lock] = {}

    def matches(self, index: SourceIndex, match: str, cancel: threading.Event | None) -> list[tuple[int, float]]:
        key = (index.path, match)
        with self._lock:
            asking = self._pending.setdefault(key, threading.Lock())
        with asking:  # sources asking at once wait for the first answer instead of each querying
            written = index.written()
            with self._lock:
                kept = self._answers.get(key)
            if kept is not None and kept[0] == written:
                return kept[1]
            try:
                rows = index._ranked(match, cancel)
            except BaseException:  # cancelled or failed: no answer, and no lock kept for it
                with self._lock:
                    if key not in self._answers:
                        self._pending.pop(key, None)
                raise
            with self._lock:
                self._answers.pop(key, None)
                self._answers[key] = (written, rows)
                while len(self._answers) > self.KEPT:
                    oldest = next(iter(self._answers))
                    del self._answers[oldest]
                    self._pending.pop(oldest, None)
            return rows


_SHARED = _SharedMatches()


class StoredFile:
    """What the index holds of one file (see `transcript.Stored`); a file read on keeps its nodes."""

    keeps_nodes = True

    def __init__(self, index: SourceIndex, file: int) -> None:
        self._index = index
        self._file = file
        row = index._connection().execute("SELECT pk FROM sessions WHERE file = ?", (file,)).fetchone()
        self._session = None if row is None else row[0]

    def nodes(self, keys: Sequence[str]) -> dict[str, Node]:
        conn = self._index._connection()
        out: dict[str, Node] = {}
        for start in range(0, len(keys), _BATCH):
            batch = list(keys[start : start + _BATCH])
            marks = ",".join("?" * len(batch))
            rows = conn.execute(
                f"SELECT key, parent, says, at, msgs, blocks FROM nodes WHERE file = ? AND key IN ({marks})",
                (self._file, *batch),
            )
            for key, parent, says, at, msgs, blocks in rows:
                out[key] = Node(key, parent, bool(says), at, msgs, blocks)
        return out

    def said(self, position: int) -> Said:
        found = self.messages(position, position + 1)
        if not found:
            raise LookupError(f"no stored message at {position}")
        return found[0]

    def messages(self, start: int, stop: int) -> list[Said]:
        return [] if self._session is None else self._index.messages(self._session, start, stop)

    def spill(self) -> None:
        return None  # reading on from the offset: the new records are few

    def turn_starts(self, before: int, limit: int) -> list[int]:
        if self._session is None or before <= 0 or limit <= 0:
            return []
        base = self._session << ORD_BITS
        rows = self._index._connection().execute(
            "SELECT rowid FROM messages WHERE rowid BETWEEN ? AND ? AND turn = 1 ORDER BY rowid DESC LIMIT ?",
            (base, base + before - 1, limit),
        )
        return [rowid - base for (rowid,) in rows]


class NothingStored:
    """The `transcript.Stored` of a file read from its start (`keeps_nodes`: see `reading.KEYED_BYTES`).

    With `spill_dir`, a read that keeps nodes may spill them to a `NodeSpill` there (made on first ask).
    """

    def __init__(self, keeps_nodes: bool = True, spill_dir: Path | None = None) -> None:
        self.keeps_nodes = keeps_nodes
        self._spill_dir = spill_dir if keeps_nodes else None
        self.spilled: NodeSpill | None = None

    def spill(self) -> NodeSpill | None:
        if self.spilled is None and self._spill_dir is not None:
            self.spilled = NodeSpill.create(self._spill_dir)
        return self.spilled

    def nodes(self, keys: Sequence[str]) -> dict[str, Node]:
        return {}

    def said(self, position: int) -> Said:
        raise LookupError(f"no stored message at {position}")

    def messages(self, start: int, stop: int) -> list[Said]:
        return []

    def turn_starts(self, before: int, limit: int) -> list[int]:
        return []


def _file_entry(row: tuple[int, bytes, int, int, int, int, int, int, bytes, bytes, int, int, int, int]) -> FileEntry:
    pk, path, dev, ino, size, mtime_ns, offset, head_len, head, tail, generation, skipped, oversized, keyed = row
    seen = Observed(dev, ino, size, mtime_ns, offset, head_len, head, tail)
    return FileEntry(pk, os.fsdecode(path), seen, generation, skipped, oversized, bool(keyed))


def _node_values(file: int, nodes: Iterable[Node]) -> Iterator[tuple[object, ...]]:
    return ((file, n.key, n.parent, int(n.says), n.at, n.msgs, n.blocks) for n in nodes)


ATTACHED_SPILLS = 8
"""Spills one transaction copies from: SQLite attaches at most 10 files to a connection unless built otherwise."""


def _spill_groups(reads: list[FileRead]) -> Iterator[list[FileRead]]:
    """`reads` in order, in groups holding at most `ATTACHED_SPILLS` reads that spilled their nodes."""
    group: list[FileRead] = []
    spills = 0
    for read in reads:
        if isinstance(read.update.nodes, NodeSpill):
            if spills == ATTACHED_SPILLS:
                yield group
                group, spills = [], 0
            spills += 1
        group.append(read)
    if group or not reads:
        yield group


@contextlib.contextmanager
def _attached(conn: sqlite3.Connection, spills: list[NodeSpill]) -> Iterator[dict[str, str]]:
    """Attach the spills to `conn` (outside a transaction, as SQLite requires): their schema names by path."""
    schemas: dict[str, str] = {}
    try:
        for spill in spills:
            schema = f"spill{len(schemas)}"
            conn.execute(f"ATTACH DATABASE ? AS {schema}", (spill.path,))
            schemas[spill.path] = schema
        yield schemas
    finally:
        for schema in schemas.values():
            conn.execute(f"DETACH DATABASE {schema}")


def _copy_nodes(conn: sqlite3.Connection, file: int, spill: NodeSpill, schemas: Mapping[str, str]) -> None:
    conn.execute(f"{_INSERT_NODE.partition(' VALUES')[0]} {select_rows(schemas[spill.path])}", (file,))


def _session_values(session: int, file: int, facts: Facts) -> tuple[object, ...]:
    """A session's row for `sessions`, from `pk` to `messages`."""
    cwd, title = _blob(facts.cwd), _blob(facts.title)
    return (session, file, facts.agent_id, cwd, facts.created_at, facts.updated_at, title, facts.messages)


def _message_values(
    first: int, rows: Sequence[MessageRow], *, room: int
) -> tuple[list[tuple[object, ...]], list[tuple[int, str | bytes]]]:
    """Messages (`message_rows`) as rows of `messages` and `texts` from rowid `first`, at most `room` of them."""
    rows = rows[: max(0, room)]
    return [(first + row[0], *row[1:8]) for row in rows], [(first + row[0], row[8]) for row in rows]


def _read_rows(read: FileRead) -> Sequence[MessageRow]:
    """A read's new messages as `message_rows` (made by its worker, or here)."""
    return read.rows if read.rows is not None else message_rows(read.update.tail)


def _file_values(read: FileRead) -> FileValues:
    """A read's values for `files`, from `dev` to `keyed`."""
    seen = read.seen
    return (
        seen.dev,
        seen.ino,
        seen.size,
        seen.mtime_ns,
        seen.offset,
        seen.head_len,
        seen.head,
        seen.tail,
        _state_json(read.update.state),
        read.skipped,
        read.oversized,
        int(read.unfinished),
        int(read.keyed),
    )


def message_rows(tail: Iterable[Said]) -> tuple[MessageRow, ...]:
    """Messages as the index stores them: (position, role, time, source, model, stream, turn, texts, search text)."""
    return tuple(
        (
            position,
            said.message.role,
            said.message.time,
            _source_json(said.message),
            said.message.model,
            said.stream,
            int(said.message.role == "user" and said.message.source.get("kind") == "user"),
            _texts_json(said.message.texts),
            _searchable("\n".join(said.message.texts)),
        )
        for position, said in enumerate(tail)
    )


_state_json = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
"""A projector's state as `files.state` keeps it (one encoder for every file: `json.dumps` with
arguments makes a new one per call)."""


def _texts_json(texts: tuple[str, ...]) -> str:
    """A message's texts as a JSON array, ASCII only: what `json.dumps` writes, at a fifth of its cost."""
    return "[" + ",".join([encode_basestring_ascii(text) for text in texts]) + "]"


def _entries(value: JsonValue) -> dict[str, JsonValue]:
    """An object of a store's recorded state (its marks, its skipped counts) as a dict to change."""
    return dict(value) if isinstance(value, dict) else {}


def _source_json(message: SourceMessage) -> str:
    if message.role != "user":
        return "{}"
    source = dict(message.source)
    return _USER_SOURCE if source == {"kind": "user"} else json.dumps(source, separators=(",", ":"), sort_keys=True)


_SOURCES: dict[str, Mapping[str, str]] = {}
"""A user message's source by its JSON: a session has a handful of them (typed, checkpoint)."""
_DECODE = json.JSONDecoder().decode


def _said(row: tuple[str, int, str, str, str | None, str]) -> Said:
    role, when, source, model, stream, texts = row
    if role == "user":
        parsed = _SOURCES.get(source)
        if parsed is None:
            parsed = _SOURCES[source] = MappingProxyType(_DECODE(source))
        return Said(SourceMessage(role, tuple(_DECODE(texts)), when, parsed, model), stream)
    return Said(SourceMessage(role, tuple(_DECODE(texts)), when, model=model), stream)


def _session(row: tuple[int, int, bytes, str, bytes | None, int, int, bytes | None, int]) -> SessionEntry:
    pk, file, path, agent_id, cwd, created, updated, title, messages = row
    return SessionEntry(pk, file, os.fsdecode(path), agent_id, _text(cwd), created, updated, _text(title), messages)


def _current(conn: sqlite3.Connection, source: str, projection: int) -> bool:
    """Whether the index file has this schema and `source`'s entries this projection (a read: opening an
    index as it should be takes no write lock, which a builder in another process may hold)."""
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return False
    row = conn.execute("SELECT projection FROM sources WHERE name = ?", (source,)).fetchone()
    return row is not None and row[0] == projection


def process_alive(pid: int) -> bool:
    """Whether a process of this pid runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
