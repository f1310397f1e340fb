"""Connections to the SQLite file and the transactions run on them."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from types import TracebackType

from dsh_host.store.codec import from_sqlite, to_sqlite

BUSY_TIMEOUT_MS = 10_000
MMAP_BYTES = 1 << 34  # SQLite caps it at its compile-time maximum (2 GiB unless built otherwise)
FOLD_FUNCTION = "dsh_fold"
_SQLITE_BUSY = 5  # the primary result code; extended codes keep it in their low byte


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the store's file, set up as every one of the store's is."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Reads map the file instead of copying pages through read() calls, and threads reading
    # different sessions then contend on nothing but the OS page cache. All of it, as far as
    # SQLite allows: pages past the map go through read() into a 2 MB page cache, and a
    # search's lookups over a 100,000-session store (370 MB) reach them.
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    register_fold(conn)
    return conn


def register_fold(conn: sqlite3.Connection) -> None:
    """Register `dsh_fold` (Python's `str.lower` on stored text) on a connection; the search triggers use it."""

    def fold(value: str | bytes | None) -> str | bytes | None:
        return None if value is None else to_sqlite(from_sqlite(value).lower())

    conn.create_function(FOLD_FUNCTION, 1, fold, deterministic=True)


class WriterBusy(Exception):
    """A write that may not wait found another writer in its way; nothing was written."""


def connect_quick(path: Path) -> sqlite3.Connection:
    """A connection for writes that may not wait (on an event loop's thread).

    It never waits for SQLite's write lock (busy timeout 0: a `Transaction` on it with
    `wait=False` raises `WriterBusy` instead), and a commit on it never checkpoints the log,
    since a checkpoint syncs the file to disk: the store's ordinary writes do that.
    """
    conn = connect(path)
    conn.execute("PRAGMA busy_timeout = 0")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


def _is_busy(error: BaseException) -> bool:
    """Whether `error` is SQLite's "busy" (another connection holds a lock), extended codes included."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11 and later
    if code is not None:
        return code & 0xFF == _SQLITE_BUSY
    return str(error).startswith("database is locked")


class Transaction:
    """One transaction on `conn` (`begin` starts it): committed when the block ends, rolled back
    when it raises. With a `lock`, the block runs holding it (one writer of a store at a time).

    With `wait=False` it waits for nobody: when `lock` is held, or SQLite reports another
    connection in the way (on a `connect_quick` connection, at once), it raises `WriterBusy`
    with nothing written.

    A class rather than a generator: a read or a flush enters one, and this costs less.
    """

    __slots__ = ("_begin", "_conn", "_lock", "_wait")

    def __init__(
        self, conn: sqlite3.Connection, begin: str, lock: threading.Lock | None = None, *, wait: bool = True
    ) -> None:
        self._conn, self._begin, self._lock, self._wait = conn, begin, lock, wait

    def __enter__(self) -> sqlite3.Connection:
        if self._lock is not None and not self._lock.acquire(blocking=self._wait):
            raise WriterBusy
        try:
            self._conn.execute(self._begin)
        except BaseException as exc:
            self._release()
            if not self._wait and _is_busy(exc):
                raise WriterBusy from exc
            raise
        return self._conn

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            if kind is None:
                try:
                    self._conn.execute("COMMIT")
                except BaseException as exc:
                    self._rollback()
                    if not self._wait and _is_busy(exc):
                        raise WriterBusy from exc
                    raise
            else:
                self._rollback()
                if not self._wait and error is not None and _is_busy(error):
                    raise WriterBusy from error
        finally:
            self._release()

    def _rollback(self) -> None:
        # The transaction has nothing to keep; an error ending it must not hide the one that did.
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
