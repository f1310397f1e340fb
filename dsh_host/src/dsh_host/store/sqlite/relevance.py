"""FTS5's BM25 for texts the SQLite store does not hold, with the statistics of `surface_fts`.

FTS5 ranks a body match with BM25 (k1 = 1.2, b = 0.75): for each phrase of the query (here one
per query word) `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length))`,
summed and negated, where `idf = ln((rows - hits + 0.5) / (hits + 0.5))` (at least 1e-6), `tf`
the phrase's occurrences in the row and `hits` the rows holding it. This module computes the
same number for a foreign text: the text is split into words by an FTS5 table of the same
tokenizer in the connection's temp schema (so tokens are FTS5's own), and `rows`, the average
length and `hits` are the store's. A test pins the result to what FTS5 itself reports for a
stored node.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections import defaultdict
from collections.abc import Sequence

from dsh_host.store.search import body_words
from dsh_host.store.sqlite.search import SURFACE_TOKENIZER, fts_phrase

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
_AVERAGES_ROWID = 1  # FTS5 keeps its row count and total token count in this row of `<table>_data`

_HITS = "SELECT count(*) FROM surface_fts WHERE surface_fts MATCH ?"
_SCRATCH = "dsh_scoring"
_SETUP = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH} USING fts5(text, tokenize = '{SURFACE_TOKENIZER}')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH}_terms USING fts5vocab('temp', '{_SCRATCH}', 'instance')",
)


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, the ninth byte whole), as FTS5 writes its averages."""
    values, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def store_statistics(conn: sqlite3.Connection) -> tuple[int, int]:
    """The rows `surface_fts` holds and their total length in tokens."""
    row = conn.execute(f"SELECT block FROM surface_fts_data WHERE id = {_AVERAGES_ROWID}").fetchone()
    values = _varints(row[0]) if row is not None and row[0] else []
    return (values[0], values[1]) if len(values) >= 2 else (0, 0)


def _storable(text: str) -> str:
    # A lone surrogate cannot be bound as text; it separates words anyway.
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _tokens(conn: sqlite3.Connection, texts: Sequence[str]) -> list[list[str]]:
    """Each text as FTS5's tokenizer splits it (the scratch table is emptied afterwards)."""
    conn.executemany(f"INSERT INTO temp.{_SCRATCH} (rowid, text) VALUES (?, ?)", enumerate(map(_storable, texts), 1))
    tokens: list[list[str]] = [[] for _ in texts]
    for doc, term in conn.execute(f"SELECT doc, term FROM temp.{_SCRATCH}_terms ORDER BY doc, offset"):
        tokens[doc - 1].append(term)
    conn.execute(f"DELETE FROM temp.{_SCRATCH}")
    return tokens


def _phrase_counts(
    conn: sqlite3.Connection, texts: Sequence[str], phrases: list[list[str]]
) -> list[tuple[int, list[int]]]:
    """Each text's length in tokens and how often each phrase occurs in it."""
    conn.executemany(f"INSERT INTO temp.{_SCRATCH} (rowid, text) VALUES (?, ?)", enumerate(map(_storable, texts), 1))
    lengths = dict(conn.execute(f"SELECT doc, count(*) FROM temp.{_SCRATCH}_terms GROUP BY doc"))
    terms = sorted({term for phrase in phrases for term in phrase})
    positions: dict[tuple[int, str], set[int]] = defaultdict(set)
    if terms:
        marks = ",".join("?" * len(terms))
        query = f"SELECT doc, term, offset FROM temp.{_SCRATCH}_terms WHERE term IN ({marks})"
        for doc, term, offset in conn.execute(query, terms):
            positions[doc, term].add(offset)
    conn.execute(f"DELETE FROM temp.{_SCRATCH}")
    out = []
    for doc in range(1, len(texts) + 1):
        counts = []
        for phrase in phrases:
            starts = positions.get((doc, phrase[0]), set()) if phrase else set()
            at = [positions.get((doc, term), set()) for term in phrase]
            counts.append(sum(all(start + i in seen for i, seen in enumerate(at)) for start in starts))
        out.append((lengths.get(doc, 0), counts))
    return out


def score_texts(conn: sqlite3.Connection, query: str, texts: Sequence[str]) -> list[float] | None:
    """Each text's BM25 for `query` with `surface_fts`'s statistics (lower is better; see the module)."""
    words = body_words(query)
    if not texts:
        return []
    if not words:
        return [0.0] * len(texts)
    conn.execute("BEGIN")
    try:
        rows, total = store_statistics(conn)
        if rows == 0:
            return None
        hits = [conn.execute(_HITS, (fts_phrase(word),)).fetchone()[0] for word in words]
        for statement in _SETUP:
            conn.execute(statement)
        phrases = _tokens(conn, words)
        measured = _phrase_counts(conn, texts, phrases)
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("COMMIT")
    average = total / rows
    idfs = [max(math.log((rows - n + 0.5) / (n + 0.5)), MIN_IDF) for n in hits]
    scores = []
    for length, counts in measured:
        score = 0.0
        for idf, tf in zip(idfs, counts, strict=True):
            score += idf * (tf * (K1 + 1)) / (tf + K1 * (1 - B + B * length / average))
        scores.append(-score)
    return scores
