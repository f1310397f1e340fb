"""Candidate search in the PostgreSQL store: one ranked statement (see `SessionStore.search_candidates`).

The body match reads `surface.search`, a generated `tsvector` (the `simple` configuration: no
stemming, no stop words) of each node a reference shows, under a GIN index; relevance is
`ts_rank`. Nodes whose text PostgreSQL cannot hold (NUL, lone surrogates) are not indexed.
The name match scans the sessions' folded id, cwd and title with `position`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import psycopg

from dsh_host.store.base import CandidateRow, SearchCancelled, StoreError
from dsh_host.store.codec import decode, encode, folded, from_postgres, time_from_postgres, to_postgres
from dsh_host.store.postgres.pool import Pool
from dsh_host.store.search import body_words, name_needle

_HEADLINE = 'MaxFragments=1, MaxWords=12, MinWords=4, ShortWord=0, StartSel="", StopSel=""'
# Candidate search (see `SessionStore.search_candidates`). Names: the folded needle anywhere in
# the folded id, cwd or title (bytes, so exactly Python's `in`). Body: every word in one node,
# the session's best node standing for it. Snippets are cut for the returned rows only.
_NAMES = """names AS MATERIALIZED (
    SELECT pk FROM dsh.sessions
    WHERE position(%(needle)s IN id_folded) > 0 OR position(%(needle)s IN cwd_folded) > 0
        OR position(%(needle)s IN title_folded) > 0
)"""
_RANKED = f"""
SELECT r.id, r.created_at, r.cwd, r.cwd_raw, r.title, r.title_raw, r.last_activity_at,
    CASE WHEN r.text IS NOT NULL THEN
        CASE WHEN starts_with(r.text, h.h) THEN '' ELSE '…' END || h.h
        || CASE WHEN right(r.text, length(h.h)) = h.h THEN '' ELSE '…' END
    END,
    r.score
FROM (
    SELECT s.id, s.created_at, s.cwd, s.cwd_raw, s.title, s.title_raw, s.last_activity_at, m.text, m.score,
        CASE WHEN NOT %(grouped)s THEN 0 WHEN s.cwd IS NULL AND s.cwd_raw IS NULL THEN 1
            WHEN %(has_cwd)s AND s.cwd IS NOT DISTINCT FROM %(cwd)s AND s.cwd_raw IS NOT DISTINCT FROM %(cwd_raw)s
            THEN 0 ELSE 2 END AS grp
    FROM matched AS m JOIN dsh.sessions AS s ON s.pk = m.pk
    WHERE s.id IS DISTINCT FROM %(target)s
    ORDER BY grp, m.text IS NOT NULL, m.score, s.created_at DESC, s.id
    LIMIT %(limit)s
) AS r
LEFT JOIN LATERAL (
    SELECT ts_headline('simple', r.text, plainto_tsquery('simple', %(words)s), '{_HEADLINE}') AS h
    WHERE r.text IS NOT NULL
) AS h ON true
ORDER BY r.grp, r.text IS NOT NULL, r.score, r.created_at DESC, r.id
"""
_SEARCH_NAMES = f"WITH {_NAMES}, matched AS (SELECT pk, NULL::text AS text, 0.0::float8 AS score FROM names)" + _RANKED
_SEARCH = (
    f"""WITH {_NAMES},
q AS (SELECT plainto_tsquery('simple', %(words)s) AS q),
body AS (
    SELECT DISTINCT ON (u.session_pk) u.session_pk AS pk, u.text, -ts_rank(u.search, q.q)::float8 AS score
    FROM dsh.surface AS u, q WHERE u.search @@ q.q AND u.session_pk NOT IN (SELECT pk FROM names)
    ORDER BY u.session_pk, score, u.seq
),
matched AS (
    SELECT pk, NULL::text AS text, 0.0::float8 AS score FROM names
    UNION ALL
    SELECT pk, text, score FROM body
)"""
    + _RANKED
)


def search(
    pool: Pool,
    query: str,
    *,
    target_id: str | None,
    target_cwd: str | None,
    limit: int,
    cancel: threading.Event | None,
    group_by_cwd: bool = True,
) -> list[CandidateRow]:
    """Ranked readable sessions matching `query` by name or surface text, in one read transaction."""
    needle, words = folded(name_needle(query)), " ".join(body_words(query))
    cwd, cwd_raw = to_postgres(target_cwd)
    params = {
        "needle": needle,
        "words": words,
        "target": None if target_id is None else encode(target_id),
        "grouped": group_by_cwd,
        "has_cwd": target_cwd is not None,
        "cwd": cwd,
        "cwd_raw": cwd_raw,
        "limit": limit,
    }
    sql = _SEARCH if words else _SEARCH_NAMES
    if cancel is not None and cancel.is_set():
        raise SearchCancelled("candidate search was cancelled")
    try:
        with pool.read() as conn, _cancelling(conn, cancel):
            found = conn.execute(sql, params).fetchall()
    except StoreError:
        if cancel is not None and cancel.is_set():
            raise SearchCancelled("candidate search was cancelled") from None
        raise
    return [
        CandidateRow(
            decode(sid),
            time_from_postgres(created),
            from_postgres(cwd, cwd_raw),
            from_postgres(title, title_raw),
            snippet,
            score,
            time_from_postgres(active),
        )
        for sid, created, cwd, cwd_raw, title, title_raw, active, snippet, score in found
    ]


@contextlib.contextmanager
def _cancelling(conn: psycopg.Connection, cancel: threading.Event | None) -> Iterator[None]:
    """Cancel the connection's running statement as soon as `cancel` is set (from a watcher thread)."""
    if cancel is None:
        yield
        return
    done = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        # Cancel again every 50 ms until the statement ends: a cancel that reaches the server
        # before the statement does is ignored, and the search would then run to its end.
        while not done.is_set():
            if cancel.wait(0.05):
                with lock:  # never cancel a statement of whoever has the connection next
                    if not done.is_set():
                        conn.cancel_safe()
                done.wait(0.05)

    threading.Thread(target=watch, name="dsh-search-cancel", daemon=True).start()
    try:
        yield
    finally:
        with lock:
            done.set()
