"""Candidate search in the SQLite store: two FTS5 indexes kept by triggers, and the ranked query.

- `surface_fts` indexes the text of every surface node a reference shows (unicode61 words,
  diacritics folded). Its rowid is the node's event key, `(session_pk << 32) | seq`. Triggers
  on `surface` insert and delete its rows, so it changes in the very transaction that changes
  the surface: a compaction's replace removes the folded nodes from search as it removes them
  from the surface.
- `session_names` indexes each session's lower-cased (Python `str.lower`, as the spec's match)
  id, latest title and cwd as trigrams, so a name match of three or more characters is an
  index lookup; shorter needles (and those holding control characters or surrogates, which
  the trigram query cannot carry) scan its rows with `instr`, which is exact too. Triggers on
  `sessions` keep it, through the `dsh_fold` function every connection registers.

One statement ranks name and body matches together and stops at the limit; snippets are then
cut for the body matches returned. A progress handler checks the cancel event, so a
superseded search stops within a few thousand VM steps.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from dsh_host.store.base import CandidateRow, SearchCancelled
from dsh_host.store.search import body_words, name_needle, searchable_condition

FOLD_FUNCTION = "dsh_fold"
SNIPPET_TOKENS = 12
_PROGRESS_STEPS = 2_000
_TRIGRAM = 3


SEARCH_SCHEMA = f"""
CREATE VIRTUAL TABLE surface_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE session_names USING fts5(id, title, cwd, tokenize = 'trigram case_sensitive 1');
CREATE TRIGGER surface_fts_insert AFTER INSERT ON surface WHEN {searchable_condition("new.")} BEGIN
    INSERT INTO surface_fts (rowid, text) VALUES ((new.session_pk << 32) | new.seq, new.text);
END;
CREATE TRIGGER surface_fts_delete AFTER DELETE ON surface WHEN {searchable_condition("old.")} BEGIN
    DELETE FROM surface_fts WHERE rowid = (old.session_pk << 32) | old.seq;
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

# Filling the indexes of a database made before them: sessions at once, surface rows by ranges
# of sessions so the caller can report progress.
_FILL_NAMES = (
    f"INSERT INTO session_names (rowid, id, title, cwd) "
    f"SELECT pk, {FOLD_FUNCTION}(id), {FOLD_FUNCTION}(title), {FOLD_FUNCTION}(cwd) FROM sessions"
)
_FILL_SURFACE = (
    "INSERT INTO surface_fts (rowid, text) SELECT (session_pk << 32) | seq, text FROM surface AS new "
    f"WHERE session_pk BETWEEN ? AND ? AND {searchable_condition('new.')}"
)
FILL_BATCH_SESSIONS = 500


def register_fold(conn: sqlite3.Connection, to_text: Callable, from_text: Callable) -> None:
    """Register `dsh_fold` (Python's `str.lower` on stored text) on a connection; triggers use it."""

    def fold(value: str | bytes | None) -> str | bytes | None:
        return None if value is None else to_text(from_text(value).lower())

    conn.create_function(FOLD_FUNCTION, 1, fold, deterministic=True)


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


def _phrase(text: str) -> str:
    """`text` as one FTS5 phrase: within double quotes every character is literal but `"` (doubled)."""
    return '"' + text.replace('"', '""') + '"'


def _names_source(needle: str) -> tuple[str, list[object]]:
    """The pks of sessions whose folded id, title or cwd contains `needle`, and its parameters."""
    if len(needle) >= _TRIGRAM and needle.isprintable():
        return "SELECT rowid AS pk FROM session_names WHERE session_names MATCH ?", [_phrase(needle)]
    raw = needle.encode("utf-8", "surrogatepass")
    return (
        "SELECT rowid AS pk FROM session_names WHERE instr(CAST(id AS BLOB), ?1) "
        "OR instr(CAST(title AS BLOB), ?1) OR instr(CAST(cwd AS BLOB), ?1)",
        [raw],
    )


_RANKED = """
WITH names(pk) AS MATERIALIZED ({names}),
hits(key, score) AS (SELECT rowid, rank FROM surface_fts WHERE surface_fts MATCH ?),
body(pk, key, score) AS (SELECT key >> 32, key, min(score) FROM hits GROUP BY key >> 32),
matched(pk, key, score) AS (
    SELECT pk, NULL, 0.0 FROM names
    UNION ALL
    SELECT pk, key, score FROM body WHERE pk NOT IN (SELECT pk FROM names)
)
SELECT s.id, s.created_at, s.cwd, s.title, m.key, m.score
FROM matched AS m JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT ?
ORDER BY CASE WHEN s.cwd IS NULL THEN 1 WHEN s.cwd = ? THEN 0 ELSE 2 END, m.key IS NOT NULL, m.score,
    s.created_at DESC, s.id
LIMIT ?
"""

_RANKED_NAMES = """
WITH names(pk) AS ({names})
SELECT s.id, s.created_at, s.cwd, s.title, NULL, 0.0
FROM names AS m JOIN sessions AS s ON s.pk = m.pk
WHERE s.id IS NOT ?
ORDER BY CASE WHEN s.cwd IS NULL THEN 1 WHEN s.cwd = ? THEN 0 ELSE 2 END, s.created_at DESC, s.id
LIMIT ?
"""

_EVERY_SESSION = """
SELECT id, created_at, cwd, title, NULL, 0.0 FROM sessions
WHERE id IS NOT ?
ORDER BY CASE WHEN cwd IS NULL THEN 1 WHEN cwd = ? THEN 0 ELSE 2 END, created_at DESC, id
LIMIT ?
"""

_SNIPPET = (
    f"SELECT CAST(snippet(surface_fts, 0, '', '', '…', {SNIPPET_TOKENS}) AS BLOB) FROM surface_fts "
    "WHERE surface_fts MATCH ? AND rowid = ?"
)


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    target: bytes | None,
    target_cwd: str | bytes | None,
    limit: int,
    cancel: threading.Event | None,
    from_text: Callable,
) -> list[CandidateRow]:
    """Run a candidate search on `conn` (see `SessionStore.search_candidates`)."""
    needle = name_needle(query)
    words = body_words(query)
    match = " ".join(_phrase(word) for word in words)
    if not needle:
        sql, params = _EVERY_SESSION, []
    else:
        names, params = _names_source(needle)
        if words:
            sql = _RANKED.format(names=names)
            params.append(match)
        else:
            sql = _RANKED_NAMES.format(names=names)
    params += [target, target_cwd, limit]
    if cancel is not None and cancel.is_set():
        raise SearchCancelled("candidate search was cancelled")
    conn.execute("BEGIN")
    try:
        if cancel is not None:
            conn.set_progress_handler(cancel.is_set, _PROGRESS_STEPS)
        try:
            rows = conn.execute(sql, params).fetchall()
            snippets = [None if key is None else _snippet(conn, match, key) for *_, key, _ in rows]
        except sqlite3.OperationalError:
            if cancel is not None and cancel.is_set():
                raise SearchCancelled("candidate search was cancelled") from None
            raise
        finally:
            if cancel is not None:
                conn.set_progress_handler(None, 0)
    finally:
        conn.execute("COMMIT")
    return [
        CandidateRow(sid.decode("utf-8", "surrogatepass"), created, from_text(cwd), from_text(title), snippet, score)
        for (sid, created, cwd, title, _, score), snippet in zip(rows, snippets, strict=True)
    ]


def _snippet(conn: sqlite3.Connection, match: str, key: int) -> str:
    (raw,) = conn.execute(_SNIPPET, (match, key)).fetchone()
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # the cut fell inside a character: show its bytes replaced
        return raw.decode("utf-8", "replace")
