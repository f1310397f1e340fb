"""The PostgreSQL store's writes, each inside the caller's transaction: batches, imports, deletes, sharing.

A write to a stored session locks its row first (`SELECT ... FOR UPDATE`), so two hosts
appending to one session serialise there; the second finds the seq it expected taken and gets a
conflict error with nothing written. A new session's row is created by an insert that yields to
any row of the same id (ids are unique across the database). Only the session's owner may change
it: row-level security lets no other role lock or write its rows. Deleting a session, or
importing over it, is refused while another connection holds the session's lease (a
session-level advisory lock on `lease_key`; see `dsh_host.store.postgres.locks`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg

from dsh_host.session.events import Event, SessionHeader, surface_text
from dsh_host.store import rows
from dsh_host.store.base import SessionBusy, SessionNotFound, StoreError, id_not_available
from dsh_host.store.codec import encode, fits_postgres, folded, pack_fields, to_postgres

# A batch's lines go as one text the server splits: a log line never holds a raw newline (JSON
# escapes it), and building an array parameter costs a Python call per element, more than the
# insert itself. Seqs are contiguous (`rows.Batch` checks), so the server numbers the lines.
_INSERT_EVENTS = (
    "INSERT INTO dsh.events (session_pk, seq, line) SELECT %s, %s + t.n - 1, t.line "
    "FROM unnest(string_to_array(%s, E'\\n')) WITH ORDINALITY AS t (line, n)"
)
# Surface rows are few per batch; their arrays go in binary (the text format escapes in Python).
_INSERT_SURFACE = (
    "INSERT INTO dsh.surface (session_pk, ord, seq, type, source_kind, source_plugin, text, raw) "
    "SELECT %s, * FROM unnest(%b::bigint[], %b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::bytea[])"
)


def append(conn: psycopg.Connection, batch: rows.Batch) -> None:
    """Persist a contiguous batch; the first batch creates the session."""
    header = batch.header
    # A batch from seq 0 is nearly always a new session's first: try to create it at once (one
    # round trip), and look the session up only when it exists.
    pk = _try_insert_session(conn, header) if batch.first == 0 else None
    if pk is not None:
        next_seq = next_ord = 0
    else:
        row = _owned_for_update(conn, header.id)
        if row is None:
            if batch.first != 0:
                raise batch.not_stored()
            raise _taken(header.id)
        pk, next_seq, next_ord = row
    batch.check_start(next_seq)
    _write_events(conn, pk, batch, next_ord)


def import_log(conn: psycopg.Connection, header: SessionHeader, batch: rows.Batch | None, *, replace: bool) -> None:
    """Store a whole, already validated log (`replace` drops an existing one)."""
    row = _owned_for_update(conn, header.id)
    if row is not None:
        if not replace:
            raise rows.already_exists(header.id)
        _refuse_if_driven(conn, header.id)
        _delete(conn, row[0])
    pk = _try_insert_session(conn, header)
    if pk is None:
        raise _taken(header.id)
    if batch is not None:
        _write_events(conn, pk, batch, 0)


def delete(conn: psycopg.Connection, session_id: str) -> bool:
    """Remove a session of this role's; False when there was none."""
    row = _owned_for_update(conn, session_id)
    if row is not None:
        _refuse_if_driven(conn, session_id)
        _delete(conn, row[0])
    return row is not None


def share(conn: psycopg.Connection, session_id: str, role: str | None) -> None:
    """Let members of `role` read the session (None: nobody but its owner); owner only."""
    if _owned_for_update(conn, session_id) is None:
        raise SessionNotFound(session_id)
    if role is not None and conn.execute("SELECT to_regrole(%s)", (_quoted_role(role),)).fetchone()[0] is None:  # type: ignore[index]
        raise StoreError(f"role {role!r} does not exist")
    conn.execute(
        "UPDATE dsh.sessions SET reader = %s::regrole WHERE id = %s",
        (None if role is None else _quoted_role(role), encode(session_id)),
    )


def lease_key(session_id: str) -> int:
    """The advisory lock key of a session's lease: 64 bits of a hash of its id."""
    digest = hashlib.sha256(b"dsh-session\0" + encode(session_id)).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _refuse_if_driven(conn: psycopg.Connection, session_id: str) -> None:
    """SessionBusy when another connection holds the session's lease; until commit, nobody can take it."""
    # Called once the session is known to be visible and ours: the lease says nothing of others' sessions.
    (free,) = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (lease_key(session_id),)).fetchone() or (False,)
    if not free:
        raise SessionBusy(session_id)


def _owned_for_update(conn: psycopg.Connection, session_id: str) -> tuple[Any, ...] | None:
    """The session's (pk, next_seq, next_ord), locked, when this role owns it; None when it is not stored.

    A session that is only shared with this role is read-only here.
    """
    key = encode(session_id)
    # FOR UPDATE passes only rows the UPDATE policy lets this role change: its own.
    row = conn.execute("SELECT pk, next_seq, next_ord FROM dsh.sessions WHERE id = %s FOR UPDATE", (key,)).fetchone()
    if row is not None:
        return row
    shared = conn.execute("SELECT owner FROM dsh.sessions WHERE id = %s", (key,)).fetchone()
    if shared is not None:
        raise StoreError(
            f"session {session_id!r} is shared with you read-only; only its owner {shared[0]!r} can change it"
        )
    return None


def _try_insert_session(conn: psycopg.Connection, header: SessionHeader) -> int | None:
    """Create the session's row; None when its id is taken (stored, if maybe invisible)."""
    row = conn.execute(
        "INSERT INTO dsh.sessions (id, created_at, cwd, cwd_raw, header, next_seq, next_ord, id_folded, "
        "cwd_folded, last_activity_at) VALUES (%s, %s, %s, %s, %s, 0, 0, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING RETURNING pk",
        (
            encode(header.id),
            header.created_at,
            *to_postgres(header.cwd),
            rows.header_json(header),
            folded(header.id),
            folded(header.cwd),
            header.created_at,
        ),
    ).fetchone()
    return None if row is None else row[0]


def _write_events(conn: psycopg.Connection, pk: int, batch: rows.Batch, next_ord: int) -> None:
    """Insert a batch's event rows, then update the surface and session rows."""
    lines = batch.lines()
    text = "\n".join(lines)
    if text.count("\n") != len(lines) - 1:  # JSON text never holds a raw newline; a line that did would split apart
        raise StoreError(f"session {batch.header.id!r}: a log line holds a raw newline; nothing was written")
    conn.execute(_INSERT_EVENTS, (pk, batch.first, text))
    appended: list[tuple[object, ...]] = []
    raw_text = False
    for event in batch.nodes:
        op = event.surface_op
        fields = _surface_fields(event)
        raw_text = raw_text or fields[-1] is not None
        if op == "append":
            appended.append((next_ord, event.seq, *fields))
            next_ord += 1
            continue
        # A replace may shadow nodes appended earlier in this batch: write those first.
        _insert_surface(conn, pk, appended)
        appended = []
        lo, hi = conn.execute(  # type: ignore[misc]  # an aggregate: always one row
            "SELECT min(ord) FILTER (WHERE seq = %s), min(ord) FILTER (WHERE seq = %s) FROM dsh.surface "
            "WHERE session_pk = %s AND seq IN (%s, %s)",
            (op["start"], op["end"], pk, op["start"], op["end"]),
        ).fetchone()
        if lo is None or hi is None or lo > hi:
            raise rows.surface_disagrees(event)
        conn.execute("DELETE FROM dsh.surface WHERE session_pk = %s AND ord BETWEEN %s AND %s", (pk, lo, hi))
        _insert_surface(conn, pk, [(lo, event.seq, *fields)])
    _insert_surface(conn, pk, appended)
    updates = "next_seq = %s, next_ord = %s, last_activity_at = %s"
    params: list[object] = [batch.last + 1, next_ord, batch.events[-1].time]
    if batch.title is not None:
        title, seq, time = batch.title
        updates += ", title = %s, title_raw = %s, title_seq = %s, title_time = %s, title_folded = %s"
        params.extend((*to_postgres(title), seq, time, folded(title)))
    if raw_text:
        # Readers of the surface text then know to look at the raw column.
        updates += ", raw_surface_text = true"
    conn.execute(f"UPDATE dsh.sessions SET {updates} WHERE pk = %s", (*params, pk))


def _surface_fields(event: Event) -> tuple[object, ...]:
    """A surface node's (type, source_kind, source_plugin, text, raw) columns."""
    text = surface_text(event.type, event.data)
    if fits_postgres(text):
        return (*text, None)
    return (None, None, None, None, pack_fields(text))


def _insert_surface(conn: psycopg.Connection, pk: int, nodes: list[tuple[object, ...]]) -> None:
    if nodes:
        conn.execute(_INSERT_SURFACE, (pk, *map(list, zip(*nodes, strict=True))))


def _delete(conn: psycopg.Connection, pk: int) -> None:
    conn.execute("DELETE FROM dsh.events WHERE session_pk = %s", (pk,))
    conn.execute("DELETE FROM dsh.surface WHERE session_pk = %s", (pk,))
    conn.execute("DELETE FROM dsh.sessions WHERE pk = %s", (pk,))


def _taken(session_id: str) -> StoreError:
    # Stored meanwhile by another writer, or by a role this one cannot see (ids are unique across
    # the database): the words must not tell which.
    return id_not_available(session_id)


def _quoted_role(role: str) -> str:
    """A role name as regrole input (quoted, so case and punctuation are kept)."""
    return '"' + role.replace('"', '""') + '"'
