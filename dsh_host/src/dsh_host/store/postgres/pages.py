"""The PostgreSQL store's paged reads: the listing by last activity, the cwds, a surface or log page.

Each runs inside the caller's read transaction; row-level security hides from them what it
hides from the connecting role, so a page holds only what that role may read.
"""

from __future__ import annotations

import psycopg

from dsh_host.session.events import SurfaceText
from dsh_host.session.snapshots import EventsPage, SurfacePage
from dsh_host.store import pages, rows
from dsh_host.store.base import ActivityKey, SessionRow
from dsh_host.store.codec import encode, from_postgres, time_from_postgres, to_postgres, unpack_surface_text
from dsh_host.store.postgres import reads

# Read along `sessions_by_activity` (or `sessions_by_cwd` for one cwd); a page after a key
# starts as the listing by creation does.
_BY_ACTIVITY = (
    "SELECT id, created_at, cwd, title, last_activity_at, cwd_raw, title_raw FROM dsh.sessions WHERE {} "
    "ORDER BY last_activity_at DESC, id LIMIT %(limit)s"
)
_ACTIVE_AFTER = "last_activity_at <= %(at)s AND (last_activity_at < %(at)s OR id > %(id)s)"
# A node's time is read from its event line, whose envelope starts type, seq, time.
_SURFACE_PAGE = (
    "SELECT s.ord, s.seq, "
    r"""substring(e.line FROM '^\{"type":"(?:[^"\\]|\\.)*","seq":[0-9]+,"time":([0-9]+)[,}]')::double precision, """
    "s.type, s.source_kind, s.source_plugin, s.text, s.raw "
    "FROM dsh.surface AS s JOIN dsh.events AS e ON e.session_pk = s.session_pk AND e.seq = s.seq "
    "WHERE s.session_pk = %(pk)s AND s.ord < %(before)s AND (s.raw IS NOT NULL OR "
    f"(s.type IN {pages.READABLE_SQL} AND s.text <> '')) "
    "ORDER BY s.ord DESC LIMIT %(limit)s"
)
_NO_POSITION = 1 << 62  # above every surface position


def list_sessions_by_activity(
    conn: psycopg.Connection, limit: int, after: ActivityKey | None, cwd: str | None
) -> list[SessionRow]:
    """At most `limit` readable sessions, newest last activity first (see `SessionStore`)."""
    params: dict[str, object] = {"limit": limit}
    conditions = []
    if cwd is not None:
        text, raw = to_postgres(cwd)
        conditions.append("cwd = %(cwd)s" if raw is None else "cwd_raw = %(cwd)s")
        params["cwd"] = text if raw is None else raw
    if after is not None:
        conditions.append(_ACTIVE_AFTER)
        params.update(at=after[0], id=encode(after[1]))
    query = _BY_ACTIVITY.format(" AND ".join(conditions) or "true")
    return reads.page_rows(conn.execute(query, params, binary=True).fetchall())


def list_cwds(conn: psycopg.Connection) -> list[str]:
    """The distinct cwds of the readable sessions."""
    found = conn.execute(
        "SELECT DISTINCT cwd, cwd_raw FROM dsh.sessions WHERE cwd IS NOT NULL OR cwd_raw IS NOT NULL"
    ).fetchall()
    return [from_postgres(text, raw) or "" for text, raw in found]


def read_surface_page(conn: psycopg.Connection, session_id: str, before: int | None, limit: int) -> SurfacePage:
    """The newest `limit` readable surface entries before position `before` (the surface rows' `ord`),
    with the session's header and latest title."""
    pk, next_seq, header_text, title, title_raw = reads.session_row(
        conn, session_id, "pk, next_seq, header, title, title_raw"
    )

    def fetch(at: int | None, count: int) -> list[pages.NodeRow]:
        params = {"pk": pk, "before": _NO_POSITION if at is None else at, "limit": count}
        return [
            (
                ord_,
                seq,
                None if time is None else time_from_postgres(time),
                SurfaceText(kind, source, plugin, text) if raw is None else unpack_surface_text(raw),
            )
            for ord_, seq, time, kind, source, plugin, text, raw in conn.execute(_SURFACE_PAGE, params)
        ]

    header = rows.header_from_row(header_text, session_id)
    shown = from_postgres(title, title_raw)
    return pages.surface_page(header, shown, next_seq - 1 if next_seq else None, fetch, before, limit)


def read_events_page(conn: psycopg.Connection, session_id: str, before_seq: int | None, limit: int) -> EventsPage:
    """The newest `limit` events before `before_seq`, in seq order."""
    pk, next_seq = reads.session_row(conn, session_id, "pk, next_seq")
    first, stop = pages.event_span(before_seq, limit, next_seq)
    lines = conn.execute(
        "SELECT line FROM dsh.events WHERE session_pk = %s AND seq >= %s AND seq < %s ORDER BY seq", (pk, first, stop)
    ).fetchall()
    return pages.events_page(session_id, first, [line for (line,) in lines], next_seq)
