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

- `session_rank` holds what a search ranks a session by besides relevance: a small number for
  its cwd (`session_cwds` numbers each cwd once) and its creation time, in a few bytes per
  session. A body search ranks every match (thousands, for a common word), and looking each
  one's session up there rather than in `sessions`, whose rows carry the header, touches a
  tenth of the pages: the search's cost grows far less with the number of sessions stored.
  Triggers on `sessions` keep it; a session's cwd and creation time never change.

One statement ranks name and body matches together (a body search whose query names no session
skips the name arm) by everything but the session id, which `session_rank` does not hold; the
caller reads its rows until it has `limit` sessions and those tied with the last. A second
statement reads those sessions' rows and the text of each one's best node (the snippet is cut
from it), and tied sessions go by id. A progress handler checks the cancel event, so a
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


RANK_SCHEMA = """
CREATE TABLE session_cwds (code INTEGER PRIMARY KEY, cwd TEXT NOT NULL UNIQUE);
CREATE TABLE session_rank (pk INTEGER PRIMARY KEY, cwd_code INTEGER, created_at NUMERIC NOT NULL);
CREATE TRIGGER session_rank_insert AFTER INSERT ON sessions BEGIN
    INSERT INTO session_cwds (cwd) SELECT new.cwd
    WHERE new.cwd IS NOT NULL AND NOT EXISTS (SELECT 1 FROM session_cwds WHERE cwd = new.cwd);
    INSERT INTO session_rank (pk, cwd_code, created_at)
    VALUES (new.pk, (SELECT code FROM session_cwds WHERE cwd = new.cwd), new.created_at);
END;
CREATE TRIGGER session_rank_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM session_rank WHERE pk = old.pk;
END;
"""
"""The ranking keys of schema version 5 (see the module); a cwd keeps its number once its sessions are gone."""

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
{RANK_SCHEMA}"""

# Every search object, by name (version 2 of the schema used the same names for its layout).
_SEARCH_TABLES = ("surface_fts", "session_names", "session_rank", "session_cwds")
_SEARCH_TRIGGERS = (
    "surface_fts_insert",
    "surface_fts_delete",
    "session_names_insert",
    "session_names_title",
    "session_names_delete",
    "session_rank_insert",
    "session_rank_delete",
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
_FILL_RANK = (
    "INSERT INTO session_cwds (cwd) SELECT DISTINCT cwd FROM sessions WHERE cwd IS NOT NULL",
    "INSERT INTO session_rank (pk, cwd_code, created_at) "
    "SELECT s.pk, c.code, s.created_at FROM sessions AS s LEFT JOIN session_cwds AS c ON c.cwd = s.cwd",
)


def fill_rank(conn: sqlite3.Connection) -> None:
    """Fill the empty `session_rank` and `session_cwds` from every stored session (inside the caller's transaction)."""
    for statement in _FILL_RANK:
        conn.execute(statement)


def fill_indexes(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> None:
    """Index every stored session (inside the caller's transaction).

    `progress(done, total)` hears, in sessions, how far it is, when there is more than a batch.
    """
    conn.execute(_FILL_NAMES)
    fill_rank(conn)
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


# The cwd groups rank first (see `SessionStore.search_candidates`), unless the caller asked for
# none: over `sessions` (`s`) for the statements that read it, over `session_rank` (`r`) for the
# ranked one, which is told the number of the target's cwd.
def _group(cwd: str, target: str) -> str:
    """SQL for a row's cwd group (0 the target's cwd, 1 none, 2 another) from its column `cwd`."""
    return f"CASE WHEN {cwd} IS NULL THEN 1 WHEN {cwd} = {target} THEN 0 ELSE 2 END"


_GROUP = _group("s.cwd", ":cwd") + ", "
_RANK_GROUP = _group("r.cwd_code", ":cwd_code")

# Every matching node: its session's pk, its search key and its score.
_BODY = f"SELECT {_PK_OF_ROWID} AS pk, rowid AS key, rank AS score FROM surface_fts WHERE surface_fts MATCH :match"
# Every name match (no key, score 0) and every matching node.
_NAMES_AND_BODY = "SELECT pk, NULL AS key, 0.0 AS score FROM ({names}) UNION ALL " + _BODY

# What the ranked statement is told first: whether any session matches by name (if none, its
# name arm is skipped), the target's pk and the number of the target's cwd.
_PRELUDE = (
    "SELECT EXISTS ({names}), (SELECT pk FROM sessions WHERE id = :target), "
    "(SELECT code FROM session_cwds WHERE cwd = :cwd)"
)

# The matches in rank order but for the session id: a session's first row stands for it (a
# name match sorts before its nodes, its best node before the rest). The first three columns
# are the order (the cwd group and name-or-body in one number, so the sorter compares fewer
# keys), so rows equal in them are ties.
_RANKED = """
SELECT {group} * 2 + (m.key IS NOT NULL) AS tier, m.score, r.created_at, m.pk, m.key
FROM ({matches}) AS m JOIN session_rank AS r ON r.pk = m.pk
WHERE m.pk IS NOT :target_pk
ORDER BY tier, m.score, r.created_at DESC
"""
_ORDER = 3

# The listing columns of sessions a ranked search returns and the text of each one's best node
# (none for a name match), by pk: `{rows}` is `(?, ?)` for each session's pk and node position.
_LISTED = """
WITH r (pk, ord) AS (VALUES {rows})
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, t.text, s.pk
FROM r JOIN sessions AS s ON s.pk = r.pk LEFT JOIN surface AS t ON t.session_pk = r.pk AND t.ord = r.ord
"""
_LISTED_BATCH = 300  # sessions per statement (two parameters each), under SQLite's oldest limit of 999

_RANKED_NAMES = """
WITH names(pk) AS ({names})
SELECT s.id, s.created_at, s.cwd, s.title, s.last_activity_at, NULL, 0.0
FROM names AS m JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT :target
ORDER BY {group}s.created_at DESC, s.id
LIMIT :limit
"""

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
    params["cwd"] = to_sqlite(target_cwd)
    group = _GROUP if group_by_cwd else ""
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
    with Transaction(conn, "BEGIN"):  # the rows and texts are read from the same snapshot as the ranking
        if cancel is not None:
            conn.set_progress_handler(cancel.is_set, _PROGRESS_STEPS)
        try:
            if sql is None:
                rows = _ranked(conn, names, group_by_cwd, params, limit)
            else:
                rows = conn.execute(sql, params).fetchall()
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
                None if text is None else cut(from_sqlite(text)),
                score,
                active,
            )
        )
        for sid, created, cwd, title, active, text, score in rows
    ]


def _ranked(conn: sqlite3.Connection, names: str, grouped: bool, params: dict[str, object], limit: int) -> list[tuple]:
    """The rows of the first `limit` sessions that match by name or body, one per session: the
    listing columns, the text of its best node (none for a name match) and its score."""
    named, params["target_pk"], params["cwd_code"] = conn.execute(_PRELUDE.format(names=names), params).fetchone()
    matches = _NAMES_AND_BODY.format(names=names) if named else _BODY
    ranked = conn.execute(_RANKED.format(group=_RANK_GROUP if grouped else "0", matches=matches), params)
    firsts, tied = _first_rows(ranked, limit)
    listed = _listed(conn, firsts)
    if tied:  # SQLite ranked without the ids: tied sessions go by id (the order of `rank_key`)
        firsts.sort(key=lambda row: (row[0], row[1], -row[2], listed[row[_ORDER]][0]))
    return [(*listed[row[_ORDER]], row[1]) for row in firsts[:limit]]


def _listed(conn: sqlite3.Connection, firsts: list[tuple]) -> dict[int, tuple]:
    """The listing columns and node text (`_LISTED`) of each ranked row's session, by pk."""
    listed: dict[int, tuple] = {}
    for start in range(0, len(firsts), _LISTED_BATCH):
        batch = firsts[start : start + _LISTED_BATCH]
        params = [value for *_, pk, key in batch for value in (pk, None if key is None else node_of_key(key)[1])]
        sql = _LISTED.format(rows=",".join(["(?, ?)"] * len(batch)))
        listed.update((row[-1], row[:-1]) for row in conn.execute(sql, params))
    return listed


def _first_rows(cursor: sqlite3.Cursor, limit: int) -> tuple[list[tuple], bool]:
    """The first row of each session the ranked statement returns, until `limit` sessions and
    any tied with the last of them, and whether any rows tied.

    Ordered by id as well, the first `limit` sessions are among these, with the same first rows
    (a session's rows share its id, so the order between them stands).
    """
    firsts: list[tuple] = []
    seen = set()
    tied = False
    last = None
    for row in cursor:
        order = row[:_ORDER]
        if order == last:
            tied = True
        elif len(firsts) >= limit:
            break
        last = order
        if row[_ORDER] not in seen:
            seen.add(row[_ORDER])
            firsts.append(row)
    return firsts, tied
