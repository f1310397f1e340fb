"""Session leases of the PostgreSQL store: a session-level advisory lock on a connection of its own.

The lock's key is `writes.lease_key(session_id)`; the connection holding it is outside the pool
and dies, lock and all, with the process. The driver writes the session on that connection, so
a write can only happen while the lock is held.

The lease can also be lost while the process lives: the server restarts, the network drops the
connection. The next append then connects again and takes the lock again, and goes on only when
the session's log ends where this driver left it: when another host drove the session meanwhile
(or still does), the append raises `SessionBusy` and the lease is gone for good. An append whose
commit was in doubt when the connection broke finds its own last line stored, and is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import psycopg
from psycopg import errors

from dsh_host.session.events import Event, SessionHeader
from dsh_host.store import rows
from dsh_host.store.base import SessionBusy, StoreError
from dsh_host.store.codec import encode
from dsh_host.store.postgres import writes
from dsh_host.store.postgres.pool import Pool, in_transaction, lost_connection, store_error


class AdvisoryLease:
    """A held advisory lock on a dedicated connection: the session's lease until `release`."""

    def __init__(
        self, pool: Pool, session_id: str, conn: psycopg.Connection, released: Callable[[AdvisoryLease], None]
    ) -> None:
        self._pool = pool
        self._released = released
        self._session_id = session_id
        self._key = writes.lease_key(session_id)
        self._conn: psycopg.Connection | None = conn
        self._mutex = threading.Lock()  # psycopg serialises a connection's statements, not transactions

    @property
    def session_id(self) -> str:
        return self._session_id

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """The store's `append`, on the lease's connection (the lease is taken again if it was lost)."""
        if not events:
            return
        batch = rows.Batch(header, events)
        with self._mutex:
            conn = self._held()
            try:
                if conn.closed and self._retake(batch):
                    return
                self._write(batch)
                return
            except psycopg.Error as exc:
                if not lost_connection(exc):
                    raise store_error(exc) from None
            self._pool.connection_lost()
            # The server may be back already (it restarted between two flushes): try once more.
            try:
                if not self._retake(batch):
                    self._write(batch)
            except psycopg.Error as exc:
                raise store_error(exc) from None

    def release(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            _let_go(self._pool, conn, self._key)
            self._released(self)

    def _held(self) -> psycopg.Connection:
        if self._conn is None:
            raise StoreError(f"the lease of session {self._session_id!r} was released")
        return self._conn

    def _write(self, batch: rows.Batch) -> None:
        conn = self._held()
        with in_transaction(conn):
            writes.append(conn, batch)

    def _retake(self, batch: rows.Batch) -> bool:
        """Connect and take the lock again; True when `batch` turns out to be stored already.

        `SessionBusy` (and the lease is gone) when another host holds the session or wrote it
        meanwhile; a StoreError when the server cannot be reached (the lease stays lost).
        """
        self._held().close()
        conn = self._pool.dedicated(fresh=True)
        continues = written = False
        try:
            locked = _try_lock(conn, self._key)
            if locked:
                key = encode(self._session_id)
                found = conn.execute("SELECT pk, next_seq FROM dsh.sessions WHERE id = %s", (key,)).fetchone()
                pk, next_seq = found if found is not None else (None, 0)
                continues = next_seq == batch.first
                written = next_seq == batch.last + 1 and _line(conn, pk, batch.last) == batch.lines()[-1]
        except BaseException:
            conn.close()
            raise
        if continues or written:
            self._conn = conn
            return written
        # Another host holds the session, or drove it while the lease was lost: it is theirs now.
        if locked:
            _let_go(self._pool, conn, self._key)
        else:
            conn.close()
        self._conn = None
        self._released(self)
        raise SessionBusy.taken_over(self._session_id)


def take(pool: Pool, session_id: str, wait: float, released: Callable[[AdvisoryLease], None]) -> AdvisoryLease:
    """`session_id`'s lease, waiting up to `wait` seconds for it (`SessionBusy` when it stays held).

    The lease reports its release to `released`.
    """
    conn = pool.dedicated()
    key = writes.lease_key(session_id)
    try:
        try:
            locked = _try_lock(conn, key)
        except psycopg.Error as exc:
            if not lost_connection(exc):
                raise
            # A kept connection that the server dropped since (it restarted): connect anew.
            conn.close()
            pool.connection_lost()
            conn = pool.dedicated(fresh=True)
            locked = _try_lock(conn, key)
        if not locked:
            if wait <= 0:
                raise SessionBusy(session_id)
            _wait_for_lock(conn, key, session_id, wait)
    except psycopg.Error as exc:
        conn.close()
        raise store_error(exc) from None
    except BaseException:
        conn.close()
        raise
    return AdvisoryLease(pool, session_id, conn, released)


def _let_go(pool: Pool, conn: psycopg.Connection, key: int) -> None:
    """Unlock, then give the connection back to `pool` for the next lease (closed when unlocking failed)."""
    # Unlocking explicitly, never by closing: a closing connection's backend lets its locks go
    # only as it exits, after the close has returned, and a taker right after us would be refused.
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    except psycopg.Error:
        conn.close()
        return
    pool.give_back(conn)


def _try_lock(conn: psycopg.Connection, key: int) -> bool:
    (locked,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() or (False,)
    return bool(locked)


def _wait_for_lock(conn: psycopg.Connection, key: int, session_id: str, wait: float) -> None:
    """Queue for the lock on the server for up to `wait` seconds (waiters get it in turn)."""
    try:
        with conn.transaction():
            # Local to this transaction; the lock itself is the session's and outlives it.
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, round(wait * 1000))}ms",))
            conn.execute("SELECT set_config('statement_timeout', '0', true)")
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except errors.LockNotAvailable:
        raise SessionBusy.after_waiting(session_id, wait) from None


def _line(conn: psycopg.Connection, pk: int | None, seq: int) -> str | None:
    if pk is None:
        return None
    found = conn.execute("SELECT line FROM dsh.events WHERE session_pk = %s AND seq = %s", (pk, seq)).fetchone()
    return None if found is None else found[0]
