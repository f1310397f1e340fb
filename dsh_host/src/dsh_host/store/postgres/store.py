"""`PostgresSessionStore`: the store's operations, each one transaction on a pooled connection.

A driven session's lease is an advisory lock on a connection of its own (`dsh_host.store.postgres.locks`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.snapshots import EventsPage, SurfacePage, SurfaceSnapshot, SurfaceTexts
from dsh_host.store import rows
from dsh_host.store.base import ActivityKey, CandidateRow, ListingKey, SessionLease, SessionRow, StoredTitle
from dsh_host.store.leases import OutstandingLeases
from dsh_host.store.postgres import locks, pages, reads, schema, search, writes
from dsh_host.store.postgres.pool import (
    DEFAULT_POOL_SIZE,
    DEFAULT_STATEMENT_TIMEOUT_MS,
    Pool,
    StoreUnavailable,
    check_role,
    connect,
    connection_settings,
    one_line,
    session_options,
)


class PostgresSessionStore:
    """Sessions in a PostgreSQL database. Open with `PostgresSessionStore.open(dsn)`.

    Thread-safe: each operation takes a connection from a pool for its own transaction.
    """

    def __init__(self, pool: Pool, role: str) -> None:
        self._pool = pool
        self.role = role
        self.dbname = pool.dbname
        self._leases: OutstandingLeases[locks.AdvisoryLease] = OutstandingLeases()

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
    ) -> PostgresSessionStore:
        """Connect, check the role and the schema, and start the pool; nothing is written."""
        options = session_options(statement_timeout_ms)
        with connect(dsn, autocommit=True, options=options) as conn:
            try:
                role = check_role(conn)
                schema.check_version(conn)
            except psycopg.Error as exc:  # e.g. no access to the dsh schema: one line, not a traceback
                raise StoreUnavailable(f"PostgreSQL store: cannot check the database: {one_line(exc)}") from None
            dbname = conn.info.dbname
        return cls(Pool(dsn, dbname, size=pool_size, options=options), role)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> PostgresSessionStore:
        """Open the store a `[stores.postgres]` table describes."""
        dsn, pool_size, timeout = connection_settings(table)
        return cls.open(dsn, pool_size=pool_size, statement_timeout_ms=timeout)

    def close(self) -> None:
        self._leases.release_all()
        self._pool.close()

    # -- leases ------------------------------------------------------------------------------

    def lease(self, session_id: str, *, wait: float = 0.0) -> SessionLease:
        """Take `session_id`'s lease: an advisory lock on a connection of its own (see `LeasingStore.lease`)."""
        return self._leases.add(locks.take(self._pool, session_id, wait, self._leases.discard))

    # -- writes ------------------------------------------------------------------------------

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Persist a contiguous batch in one transaction; the first batch creates the session."""
        if not events:
            return
        batch = rows.Batch(header, events)
        with self._pool.transaction() as conn:
            writes.append(conn, batch)

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        """Store a whole, already validated log in one transaction (`replace` drops an existing one)."""
        batch = rows.Batch(header, events) if events else None
        with self._pool.transaction() as conn:
            writes.import_log(conn, header, batch, replace=replace)

    def delete(self, session_id: str) -> bool:
        with self._pool.transaction() as conn:
            return writes.delete(conn, session_id)

    def share(self, session_id: str, role: str | None) -> None:
        """Let members of `role` read the session (None: nobody but its owner); owner only."""
        with self._pool.transaction() as conn:
            writes.share(conn, session_id, role)

    # -- reads -------------------------------------------------------------------------------

    def sharing(self, session_id: str) -> tuple[str, str | None]:
        """(owner, role the session is shared with or None) of a readable session."""
        with self._pool.read() as conn:
            return reads.sharing(conn, session_id)

    def list_sessions(self) -> list[SessionRow]:
        """Every readable session, newest first (ties by id), with its latest title and last activity."""
        with self._pool.read() as conn:
            return reads.list_sessions(conn)

    def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRow]:
        """At most `limit` readable sessions of the listing, from the first after `after` (see `SessionStore`)."""
        with self._pool.read() as conn:
            return reads.list_sessions_page(conn, limit, after)

    def list_sessions_by_activity(
        self, limit: int, after: ActivityKey | None = None, cwd: str | None = None
    ) -> list[SessionRow]:
        """At most `limit` readable sessions, newest last activity first (see `SessionStore`)."""
        with self._pool.read() as conn:
            return pages.list_sessions_by_activity(conn, limit, after, cwd)

    def list_cwds(self) -> list[str]:
        """The distinct cwds of the readable sessions."""
        with self._pool.read() as conn:
            return pages.list_cwds(conn)

    def has(self, session_id: str) -> bool:
        with self._pool.read() as conn:
            return reads.has(conn, session_id)

    def read_header(self, session_id: str) -> SessionHeader:
        with self._pool.read() as conn:
            return reads.read_header(conn, session_id)

    def read_title(self, session_id: str) -> StoredTitle | None:
        with self._pool.read() as conn:
            return reads.read_title(conn, session_id)

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
        """Ranked readable sessions matching `query` by name or surface text (see `SessionStore`)."""
        return search.search(
            self._pool,
            query,
            target_id=target_id,
            target_cwd=target_cwd,
            limit=limit,
            cancel=cancel,
            group_by_cwd=group_by_cwd,
        )

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read transaction."""
        with self._pool.read() as conn:
            header_text, next_seq, lines = reads.surface_rows(conn, session_id)
        return rows.surface_snapshot(header_text, session_id, next_seq, lines)

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Header, last seq and each surface node's `SurfaceText` of several sessions, in order.

        One read transaction serves them all, so the sessions are observed at the same instant.
        """
        with self._pool.read() as conn:
            return [reads.read_surface_texts(conn, session_id) for session_id in session_ids]

    def read_surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        """The newest `limit` readable surface entries before position `before`, in one read transaction."""
        with self._pool.read() as conn:
            return pages.read_surface_page(conn, session_id, before, limit)

    def read_events_page(self, session_id: str, before_seq: int | None, limit: int) -> EventsPage:
        """The newest `limit` events before `before_seq`, in seq order, in one read transaction."""
        with self._pool.read() as conn:
            return pages.read_events_page(conn, session_id, before_seq, limit)

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event line of a session, in seq order, in one read transaction."""
        with self._pool.read() as conn:
            return reads.read_lines(conn, session_id)

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        header, lines = self.read_lines(session_id)
        return header, rows.events_from_lines(lines)
