"""Candidate search in the SQLite store: two FTS5 indexes kept by triggers, and the ranked query.

- `surface_fts` indexes the text of every surface node a reference shows (unicode61 words,
  diacritics folded). It is contentless: the text stays in `surface` alone, and the snippet is
  cut from there. Its rowid is the node's search key (`node_key_sql`), made from the session's
  pk and the node's surface position. Triggers on `surface` insert and delete its rows (a delete
  hands FTS5 the very text the insert did, as a contentless table needs), so it changes in the
  very transaction that changes the surface: a compaction's replace removes the folded nodes
  from search as it removes them from the surface.
- `session_names` indexes each session's lower-cased (Python `str.lower`, as `name_matches` does)
  id, latest title and cwd as trigrams, so a name match of three or more characters is an
  index lookup; shorter needles (and those holding control characters or surrogates, which
  the trigram query cannot carry) scan its rows with `instr`, which is exact too. Triggers on
  `sessions` keep it, through the `dsh_fold` function every connection registers.

One statement ranks name and body matches together (a body search whose query names no session
skips the name arm), stops at the limit; a second reads the text of each body match's best
node, which the snippet is cut from. A progress handler checks the cancel event, so a
superseded search stops within a few thousand VM steps.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from dsh_host.store.base import CandidateRow, SearchCancelled
from dsh_host.store.codec import encode, from_sqlite, to_sqlite
from dsh_host.store.search import body_words, name_needle, searchable_condition, snippet_cutter
from dsh_host.store.sqlite.connection import FOLD_FUNCTION, Transaction

SURFACE_TOKENIZER = "unicode61 remove_diacritics 2"
"""How `surface_fts` splits text into words (scoring a text on the store's scale splits it alike)."""
_PROGRESS_STEPS = 2_000
_TRIGRAM = 3
_TEXT_BATCH = 300  # nodes per statement (three parameters each), under SQLite's oldest limit of 999

# FTS5 stores the rows holding a word as deltas between rowids, so the keys of neighbouring
# sessions must lie near one another: a key of the events table's form, `pk << 32 | seq`, costs
# six bytes per delta across sessions where `pk << 8 | ord` costs two or three, and so the index
# about half its size. A session's first 256 surface positions take the narrow keys; later ones
# (long sessions) take `2**62 | pk << 32 | ord`, a range of their own where one session's nodes
# still lie together. Both need pk < 2**30.
_ORD_BITS = 8
_NARROW_ORDS = 1 << _ORD_BITS
_WIDE = 1 << 62
_WIDE_PK_MASK = (1 << 30) - 1
_WIDE_ORD_MASK = (1 << 32) - 1


def node_key_sql(row: str) -> str:
    """SQL for the search key of a `surface` row (`row` qualifies its columns: `new.`, `old.` or "")."""
    return (
        f"CASE WHEN {row}ord < {_NARROW_ORDS} THEN ({row}session_pk << {_ORD_BITS}) | {row}ord "
        f"ELSE {_WIDE} | ({row}session_pk << 32) | {row}ord END"
    )


def node_of_key(key: int) -> tuple[int, int]:
    """The session pk and surface position a search key (`node_key_sql`) stands for."""
    if key < _WIDE:
        return key >> _ORD_BITS, key & (_NARROW_ORDS - 1)
    return (key >> 32) & _WIDE_PK_MASK, key & _WIDE_ORD_MASK


_PK_OF_ROWID = f"CASE WHEN rowid < {_WIDE} THEN rowid >> {_ORD_BITS} ELSE (rowid >> 32) & {_WIDE_PK_MASK} END"


SEARCH_SCHEMA = f"""
CREATE VIRTUAL TABLE surface_fts USING fts5(text, content = '', tokenize = '{SURFACE_TOKENIZER}');
CREATE VIRTUAL TABLE session_names USING fts5(id, title, cwd, tokenize = 'trigram case_sensitive 1');
CREATE TRIGGER surface_fts_insert AFTER INSERT ON surface WHEN {searchable_condition("new.")} BEGIN
    INSERT INTO surface_fts (rowid, text) VALUES ({node_key_sql("new.")}, new.text);
END;
CREATE TRIGGER surface_fts_delete AFTER DELETE ON surface WHEN {searchable_condition("old.")} BEGIN
    INSERT INTO surface_fts (surface_fts, rowid, text) VALUES ('delete', {node_key_sql("old.")}, old.text);
END;
CREATE TRIGGER session_names_insert AFTER INSERT ON sessions BEGIN
    INSERT INTO session_names (rowid, id, title, cwd)
    VALUES (new.pk, {FOLD_FUNCTION}(new.id), {FOLD_FUNCTION}(new.title), {FOLD_FUNCTION}(new.cwd));
END;
CREATE TRIGGER session_names_title AFTER UPDATE OF title ON sessions WHEN new.title IS NOT old.title BEGIN
    UPDATE session_names SET title = {FOLD_FUNCTION}(new.title) WHERE rowid = new.pk;
END;
CREATE TRIGGER session_names_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM session_names WHERE rowid = old.pk;
END;
"""

# Every search object, by name (version 2 of the schema used the same names for its layout).
_SEARCH_TABLES = ("surface_fts", "session_names")
_SEARCH_TRIGGERS = (
    "surface_fts_insert",
    "surface_fts_delete",
    "session_names_insert",
    "session_names_title",
    "session_names_delete",
)


def drop_indexes(conn: sqlite3.Connection) -> None:
    """Drop whatever search tables and triggers the database has (inside the caller's transaction)."""
    for trigger in _SEARCH_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for table in _SEARCH_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


# Filling the indexes of a database made before them: sessions at once, surface rows by ranges
# of sessions so the caller can report progress.
_FILL_NAMES = (
    f"INSERT INTO session_names (rowid, id, title, cwd) "
    f"SELECT pk, {FOLD_FUNCTION}(id), {FOLD_FUNCTION}(title), {FOLD_FUNCTION}(cwd) FROM sessions"
)
_FILL_SURFACE = (
    f"INSERT INTO surface_fts (rowid, text) SELECT {node_key_sql('')}, text FROM surface "
    f"WHERE session_pk BETWEEN ? AND ? AND {searchable_condition('')}"
)
FILL_BATCH_SESSIONS = 500


def fill_indexes(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> None:
    """Index every stored session (inside the caller's transaction).

    `progress(done, total)` hears, in sessions, how far it is, when there is more than a batch.
    """
    conn.execute(_FILL_NAMES)
    pks = [pk for (pk,) in conn.execute("SELECT pk FROM sessions ORDER BY pk")]
    for start in range(0, len(pks), FILL_BATCH_SESSIONS):
        batch = pks[start : start + FILL_BATCH_SESSIONS]
        conn.execute(_FILL_SURFACE, (batch[0], batch[-1]))
        if progress is not None and len(pks) > FILL_BATCH_SESSIONS:
            progress(start + len(batch), len(pks))


def fts_phrase(text: str) -> str:
    """`text` as one FTS5 phrase: within double quotes every character is literal but `"` (doubled)."""
    return '"' + text.replace('"', '""') + '"'


def _names_source(needle: str) -> tuple[str, object]:
    """The pks of sessions whose folded id, title or cwd contains `needle`, and its `:needle`."""
    if len(needle) >= _TRIGRAM and needle.isprintable():
        return "SELECT rowid AS pk FROM session_names WHERE session_names MATCH :needle", fts_phrase(needle)
    return (
        "SELECT rowid AS pk FROM session_names WHERE instr(CAST(id AS BLOB), :needle) "
        "OR instr(CAST(title AS BLOB), :needle) OR instr(CAST(cwd AS BLOB), :needle)",
        encode(needle),
    )


# The cwd groups rank first (see `SessionStore.search_candidates`), unless the caller asked for none.
_GROUP = "CASE WHEN s.cwd IS NULL THEN 1 WHEN s.cwd = :cwd THEN 0 ELSE 2 END, "

# Every matching node: its session's pk, its search key and its score.
_BODY = f"SELECT {_PK_OF_ROWID} AS pk, rowid AS key, rank AS score FROM surface_fts WHERE surface_fts MATCH :match"

# Every name match and every matching node, in rank order: a session's first row stands for it
# (a name match sorts before its nodes, its best node before the rest), so the caller reads
# rows until it has `limit` sessions. The sorter needs no grouping pass and no LIMIT.
_RANKED = f"""
WITH names(pk) AS ({{names}})
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, m.key, m.score
FROM (SELECT pk, NULL AS key, 0.0 AS score FROM names UNION ALL {_BODY}) AS m
JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT :target
ORDER BY {{group}}m.key IS NOT NULL, m.score, s.created_at DESC, s.id
"""

# The same rows when no session matches by name, as most body searches find: with no union to
# materialize, each node goes from the full-text index straight to the sorter.
_RANKED_BODY = f"""
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, m.key, m.score
FROM ({_BODY}) AS m
JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT :target
ORDER BY {{group}}m.score, s.created_at DESC, s.id
"""

_RANKED_NAMES = """
WITH names(pk) AS ({names})
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, NULL, 0.0
FROM names AS m JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT :target
ORDER BY {group}s.created_at DESC, s.id
LIMIT :limit
"""

_TEXTS = (
    "WITH node (key, pk, ord) AS (VALUES {nodes}) "
    "SELECT node.key, s.text FROM node JOIN surface AS s ON s.session_pk = node.pk AND s.ord = node.ord"
)

_EVERY_SESSION = """
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, NULL, 0.0 FROM sessions AS s
WHERE s.id IS NOT :target
ORDER BY {group}s.created_at DESC, s.id
LIMIT :limit
"""


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    target_id: str | None,
    target_cwd: str | None,
    limit: int,
    cancel: threading.Event | None,
    group_by_cwd: bool = True,
) -> list[CandidateRow]:
    """Run a candidate search on `conn` (see `SessionStore.search_candidates`)."""
    needle = name_needle(query)
    words = body_words(query)
    params: dict[str, object] = {"target": None if target_id is None else encode(target_id), "limit": limit}
    group = ""
    if group_by_cwd:
        group, params["cwd"] = _GROUP, to_sqlite(target_cwd)
    sql: str | None = None  # a body search picks its statement in the transaction (`_ranked`)
    names = ""
    if not needle:
        sql = _EVERY_SESSION.format(group=group)
    else:
        names, params["needle"] = _names_source(needle)
        if words:
            params["match"] = " ".join(fts_phrase(word) for word in words)
        else:
            sql = _RANKED_NAMES.format(names=names, group=group)
    if cancel is not None and cancel.is_set():
        raise SearchCancelled("candidate search was cancelled")
    with Transaction(conn, "BEGIN"):  # the texts are read from the same snapshot as the ranking
        if cancel is not None:
            conn.set_progress_handler(cancel.is_set, _PROGRESS_STEPS)
        try:
            rows = _ranked(conn, names, group, params, limit) if sql is None else conn.execute(sql, params).fetchall()
            texts = _texts(conn, [row[5] for row in rows if row[5] is not None])
        except sqlite3.OperationalError:
            if cancel is not None and cancel.is_set():
                raise SearchCancelled("candidate search was cancelled") from None
            raise
        finally:
            if cancel is not None:
                conn.set_progress_handler(None, 0)
    cut = snippet_cutter(words)
    make = CandidateRow._make
    return [
        make(
            (
                sid.decode("utf-8", "surrogatepass"),  # the codec's `decode`, inline
                created,
                from_sqlite(cwd),
                from_sqlite(title),
                None if key is None else cut(from_sqlite(texts[key])),
                score,
                active,
            )
        )
        for sid, created, cwd, title, active, key, score in rows
    ]


def _ranked(conn: sqlite3.Connection, names: str, group: str, params: dict[str, object], limit: int) -> list[tuple]:
    """The rows of the first `limit` sessions that match by name or body, one per session."""
    (named,) = conn.execute(f"SELECT EXISTS ({names})", params).fetchone()
    sql = (_RANKED if named else _RANKED_BODY).format(names=names, group=group)
    return _first_per_session(conn.execute(sql, params), limit)


def _first_per_session(cursor: sqlite3.Cursor, limit: int) -> list[tuple]:
    """The first row of each session (by id), until `limit` sessions."""
    rows, seen = [], set()
    for row in cursor:
        if row[0] not in seen:
            seen.add(row[0])
            rows.append(row)
            if len(rows) == limit:
                break
    return rows


def _texts(conn: sqlite3.Connection, keys: list[int]) -> dict[int, str | bytes]:
    """The surface text of each node (by search key), read in batches of nodes."""
    texts: dict[int, str | bytes] = {}
    for start in range(0, len(keys), _TEXT_BATCH):
        batch = keys[start : start + _TEXT_BATCH]
        params = [value for key in batch for value in (key, *node_of_key(key))]
        texts.update(conn.execute(_TEXTS.format(nodes=",".join(["(?, ?, ?)"] * len(batch))), params))
    return texts
