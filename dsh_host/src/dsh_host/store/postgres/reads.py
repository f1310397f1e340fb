"""The PostgreSQL store's reads, each inside the caller's read transaction (one snapshot).

Reads select a session's rows by its id, so they need not wait for the sessions row first: in
pipeline mode both statements go out together. What row-level security hides from the
connecting role is, to these reads, not stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import psycopg
from psycopg.rows import TupleRow

from dsh_host.session.events import SessionHeader, SurfaceText
from dsh_host.session.snapshots import SurfaceTexts
from dsh_host.store import rows
from dsh_host.store.base import ListingKey, SessionNotFound, SessionRow, StoredTitle
from dsh_host.store.codec import encode, from_postgres, time_from_postgres, unpack_surface_text

_LISTED = "id, created_at, cwd, title, last_activity_at"
_LIST = f"SELECT {_LISTED} FROM dsh.sessions ORDER BY created_at DESC, id"
# A page starts right after the key (created_at, id) in newest-first order: the index range below
# that created_at, less the ties at it that sort before the id. It reads its rows' raw text too.
_FIRST_PAGE = f"SELECT {_LISTED}, cwd_raw, title_raw FROM dsh.sessions ORDER BY created_at DESC, id LIMIT %(limit)s"
_PAGE_AFTER = (
    f"SELECT {_LISTED}, cwd_raw, title_raw FROM dsh.sessions "
    "WHERE created_at <= %(at)s AND (created_at < %(at)s OR id > %(id)s) ORDER BY created_at DESC, id LIMIT %(limit)s"
)
_LIST_RAW = "SELECT id, cwd_raw, title_raw FROM dsh.sessions WHERE cwd_raw IS NOT NULL OR title_raw IS NOT NULL"
_PK_OF = "(SELECT pk FROM dsh.sessions WHERE id = %s)"
_SURFACE_LINES = (
    "SELECT e.line FROM dsh.surface AS s JOIN dsh.events AS e ON e.session_pk = s.session_pk AND e.seq = s.seq "
    f"WHERE s.session_pk = {_PK_OF} ORDER BY s.ord"
)
_SURFACE_TEXTS = (
    f"SELECT type, source_kind, source_plugin, text, raw FROM dsh.surface WHERE session_pk = {_PK_OF} ORDER BY ord"
)
_LINES = f"SELECT line FROM dsh.events WHERE session_pk = {_PK_OF} ORDER BY seq"


def list_sessions(conn: psycopg.Connection) -> list[SessionRow]:
    """Every readable session, newest first (ties by id), with its latest title and last activity."""
    listed = conn.execute(_LIST, binary=True)
    raw = {sid: (cwd, title) for sid, cwd, title in conn.execute(_LIST_RAW).fetchall()}
    make = SessionRow._make
    listing = [
        make((sid.decode("utf-8", "surrogatepass"), time_from_postgres(at), cwd, title, time_from_postgres(active)))
        for sid, at, cwd, title, active in listed.fetchall()
    ]
    if raw:  # the rare text that only bytea could hold
        for i, row in enumerate(listing):
            found = raw.get(encode(row.id))
            if found is not None:
                cwd, title = found
                listing[i] = row._replace(cwd=from_postgres(row.cwd, cwd), title=from_postgres(row.title, title))
    return listing


def list_sessions_page(conn: psycopg.Connection, limit: int, after: ListingKey | None) -> list[SessionRow]:
    """At most `limit` readable sessions of the listing, from the first after `after` (see `SessionStore`)."""
    params: dict[str, object] = {"limit": limit}
    if after is not None:
        params.update(at=after[0], id=encode(after[1]))
    return page_rows(conn.execute(_FIRST_PAGE if after is None else _PAGE_AFTER, params, binary=True).fetchall())


PageRow = tuple[bytes, float, "str | None", "str | None", float, "bytes | None", "bytes | None"]
"""A page query's row: id, created_at, cwd, title, last activity, then the raw cwd and title."""


def page_rows(listed: Sequence[PageRow]) -> list[SessionRow]:
    """The `SessionRow`s of a page query's rows."""
    return [
        SessionRow(
            sid.decode("utf-8", "surrogatepass"),
            time_from_postgres(at),
            from_postgres(cwd, cwd_raw),
            from_postgres(title, title_raw),
            time_from_postgres(active),
        )
        for sid, at, cwd, title, active, cwd_raw, title_raw in listed
    ]


def has(conn: psycopg.Connection, session_id: str) -> bool:
    return conn.execute("SELECT FROM dsh.sessions WHERE id = %s", (encode(session_id),)).fetchone() is not None


def read_header(conn: psycopg.Connection, session_id: str) -> SessionHeader:
    (header_text,) = session_row(conn, session_id, "header")
    return rows.header_from_row(header_text, session_id)


def read_title(conn: psycopg.Connection, session_id: str) -> StoredTitle | None:
    title, raw, seq, time = session_row(conn, session_id, "title, title_raw, title_seq, title_time")
    return None if title is None and raw is None else StoredTitle(cast(str, from_postgres(title, raw)), seq, time)


def sharing(conn: psycopg.Connection, session_id: str) -> tuple[str, str | None]:
    """(owner, role the session is shared with or None) of a readable session."""
    owner, reader = session_row(conn, session_id, "owner, reader::text")
    return owner, reader


def surface_rows(conn: psycopg.Connection, session_id: str) -> tuple[str, int, list[tuple[str]]]:
    """The header text, next seq and surface event lines a `SurfaceSnapshot` is made of.

    The caller decodes them after its transaction, which then holds its connection no longer
    than the reading takes.
    """
    lines = conn.execute(_SURFACE_LINES, (encode(session_id),))
    header_text, next_seq = session_row(conn, session_id, "header, next_seq")
    return header_text, next_seq, lines.fetchall()


def read_surface_texts(conn: psycopg.Connection, session_id: str) -> SurfaceTexts:
    """Header, last seq and each surface node's `SurfaceText`."""
    stored = conn.execute(_SURFACE_TEXTS, (encode(session_id),))
    header_text, next_seq, raw_text = session_row(conn, session_id, "header, next_seq, raw_surface_text")
    if raw_text:
        texts = [
            SurfaceText(*fields) if raw is None else unpack_surface_text(raw) for *fields, raw in stored.fetchall()
        ]
    else:
        texts = [SurfaceText._make(fields) for *fields, _ in stored.fetchall()]
    return rows.surface_texts(header_text, session_id, next_seq, texts)


def read_lines(conn: psycopg.Connection, session_id: str) -> tuple[SessionHeader, list[str]]:
    """The header and every event line, in seq order."""
    lines = conn.execute(_LINES, (encode(session_id),))
    (header_text,) = session_row(conn, session_id, "header")
    return rows.header_from_row(header_text, session_id), [line for (line,) in lines.fetchall()]


def session_row(conn: psycopg.Connection, session_id: str, columns: str) -> TupleRow:
    """The named columns of a readable session's row; SessionNotFound when there is none."""
    row = conn.execute(f"SELECT {columns} FROM dsh.sessions WHERE id = %s", (encode(session_id),)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return row
