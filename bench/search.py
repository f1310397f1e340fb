"""Candidate search benchmarks (SQLite): near a bare FTS5 query, flat in the store's size, cheap to keep.

Stores of 100,000 and 10,000 sessions, ten surface messages each (1,000,000 and 100,000
messages of twelve words from a 5,000-word vocabulary), are built by direct SQL in the bench
setup, stated honestly: `sessions` and `surface` rows are inserted in large transactions on
the store's own connection, so the store's triggers build its search indexes exactly as
appends do; no `events` rows are written (search never reads them). Two queries are planted
in a fixed number of sessions of either store, so what a search must return does not grow
with the store: a rare one (300 sessions) and a common one (3,000).

- `search_body_100k_<rare|common>`: `search_candidates(query, limit=50)` over 100,000
  sessions against a bare `SELECT rowid FROM surface_fts WHERE surface_fts MATCH ... ORDER BY
  rank LIMIT 50` on the same connection.
- `search_body_100k_vs_10k_<rare|common>`: the same search over 100,000 sessions against over
  10,000.
- `append_turn_indexed`: `store.append` of a prebuilt 1,000-event turn (a new session each
  time) into the 10,000-session store against the same into a copy of it without the search
  triggers.
- `search_index_size`: the pages (dbstat) of every table and index search adds to the
  100,000-session store, against the bytes of the text they index: the UTF-8 text of every
  surface row body search indexes plus the folded id, title and cwd of every session that
  name search indexes. "What search adds" is every b-tree of the store but those of a store
  whose search objects were dropped, so nothing search creates can go uncounted.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.store import turn_events
from bench.timing import Figure, interleaved
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session
from dsh_host.store.search import searchable_condition
from dsh_host.store.sqlite import SqliteSessionStore, search
from dsh_host.store.sqlite.connection import FOLD_FUNCTION

LARGE, SMALL = 100_000, 10_000
MESSAGES = 10  # surface messages per session: five prompts and five answers
WORDS = 12
VOCABULARY = [f"w{i}" for i in range(5_000)]
# Two queries, each planted in a fixed number of sessions whatever the store's size: a rare
# one (the session you look for) and a common one (a word of many sessions).
QUERIES = {"rare": ("migration bug", 300), "common": ("parser error", 3_000)}
LIMIT = 50
USER = {"kind": "user"}
_BATCH = 5_000


def build(path: Path, sessions: int, seed: int) -> SqliteSessionStore:
    """A store of `sessions` sessions (see the module docstring) at `path`."""
    rng = random.Random(seed)
    planted = [(query.split(), set(rng.sample(range(sessions), count))) for query, count in QUERIES.values()]
    store = SqliteSessionStore.open(path)
    conn = store._connection()  # the store's connection: its triggers need its `dsh_fold` function
    for start in range(0, sessions, _BATCH):
        session_rows, surface_rows = [], []
        for i in range(start, min(start + _BATCH, sessions)):
            pk = i + 1
            header = f'{{"type":"session","version":0,"id":"session-{i:06d}","createdAt":{i}}}'
            session_rows.append(
                (pk, f"session-{i:06d}".encode(), i, f"/work/p{i % 100}", header, 2 * MESSAGES, MESSAGES,
                 f"Refactor module {i}", i)
            )  # fmt: skip
            for ord_ in range(MESSAGES):
                words = rng.choices(VOCABULARY, k=WORDS)
                for at, (query, sessions_) in enumerate(planted):
                    if i in sessions_ and ord_ == 3 + 2 * at:
                        words[4:6] = query
                kind = "user/message" if ord_ % 2 == 0 else "assistant/message"
                source = "user" if ord_ % 2 == 0 else None
                surface_rows.append((pk, ord_, 2 * ord_, kind, source, None, " ".join(words)))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO sessions (pk, id, created_at, cwd, header, next_seq, next_ord, title, last_activity_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            session_rows,
        )
        conn.executemany(
            "INSERT INTO surface (session_pk, ord, seq, type, source_kind, source_plugin, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            surface_rows,
        )
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


def search_figures(workdir: Path) -> Iterator[Figure]:
    large = build(workdir / "large.sqlite3", LARGE, seed=1)
    small = build(workdir / "small.sqlite3", SMALL, seed=2)
    try:
        for kind, (query, count) in QUERIES.items():
            yield from query_figures(large, small, kind, query, count)
        yield index_size_figure(large, session_objects(workdir / "bare.sqlite3"))
    finally:
        large.close()
    try:
        yield append_figure(workdir, small)
    finally:
        small.close()


def query_figures(
    large: SqliteSessionStore, small: SqliteSessionStore, kind: str, query: str, count: int
) -> Iterator[Figure]:
    def search(store: SqliteSessionStore) -> Any:
        rows = store.search_candidates(query, target_id=None, target_cwd="/work/p7", limit=LIMIT)
        assert len(rows) == LIMIT and all(row.snippet for row in rows)
        return rows

    conn = large._connection()
    match = " ".join(f'"{word}"' for word in query.split())

    def bare() -> Any:
        rows = conn.execute(
            "SELECT rowid FROM surface_fts WHERE surface_fts MATCH ? ORDER BY rank LIMIT ?", (match, LIMIT)
        ).fetchall()
        assert len(rows) == LIMIT
        return rows

    baseline, t_large, t_small = interleaved(bare, lambda: search(large), lambda: search(small), rounds=20, repeat=10)
    yield Figure.timed(
        f"search_body_100k_{kind}",
        t_large,
        baseline,
        target=2.0,
        note=f"search_candidates({query!r}, limit={LIMIT}) over 100,000 sessions (1,000,000 surface messages; "
        f"{count:,} hold the words) vs a bare FTS5 MATCH ... ORDER BY rank LIMIT {LIMIT}",
    )
    yield Figure.timed(
        f"search_body_100k_vs_10k_{kind}",
        t_large,
        t_small,
        target=1.5,
        note=f"the same search over 100,000 sessions vs over 10,000 (in both, {count:,} sessions match)",
    )


def session_objects(path: Path) -> set[str]:
    """The b-trees of a store without its search objects (tables and indexes of sessions alone)."""
    SqliteSessionStore.open(path).close()
    conn = sqlite3.connect(path)
    search.drop_indexes(conn)
    names = {name for (name,) in conn.execute("SELECT name FROM dbstat")}
    conn.close()
    return names


def index_size_figure(store: SqliteSessionStore, sessions_only: set[str]) -> Figure:
    conn = store._connection()
    sizes = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    added = {name: size for name, size in sizes.items() if name not in sessions_only}
    (body_text,) = conn.execute(
        f"SELECT sum(length(CAST(text AS BLOB))) FROM surface WHERE {searchable_condition('')}"
    ).fetchone()
    folded = [f"coalesce(length(CAST({FOLD_FUNCTION}({column}) AS BLOB)), 0)" for column in ("id", "title", "cwd")]
    (name_text,) = conn.execute(f"SELECT sum({' + '.join(folded)}) FROM sessions").fetchone()
    body_index = sum(size for name, size in added.items() if name.startswith("surface_fts"))
    listed = ", ".join(f"{name} {size:,}" for name, size in sorted(added.items(), key=lambda item: -item[1]))
    return Figure(
        name="search_index_size",
        value=sum(added.values()),
        baseline=body_text + name_text,
        unit="bytes",
        target=1.5,
        note=f"pages of every b-tree search adds ({listed}) vs the text they index (surface text {body_text:,}, "
        f"folded names {name_text:,}), 100,000 sessions; the body index alone is "
        f"{body_index / body_text:.2f}x the surface text",
    )


def append_figure(workdir: Path, indexed: SqliteSessionStore) -> Figure:
    plain_path = workdir / "plain.sqlite3"
    indexed._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(indexed.path, plain_path)
    conn = sqlite3.connect(plain_path)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.close()
    plain = SqliteSessionStore.open(plain_path)
    events = turn_events()
    sample = Session(SessionHeader(id="sample", created_at=0, cwd="/bench"))
    for kind, data, surface_op, sources in events:
        sample.append(kind, data, surface_op=surface_op, sources=sources)
    batch = list(sample.events)
    counter = iter(range(1_000_000))
    try:

        def append(store: SqliteSessionStore) -> None:
            store.append(SessionHeader(id=f"turn-{next(counter)}", created_at=0, cwd="/bench"), batch)

        append(indexed)  # warm up the statement caches
        append(plain)
        # 72 samples of each: with fewer, the best time of either side still varies by 10% from
        # run to run on a busy machine, and the ratio with it.
        baseline, value = interleaved(lambda: append(plain), lambda: append(indexed), rounds=24, repeat=3)
    finally:
        plain.close()
    return Figure.timed(
        "append_turn_indexed",
        value,
        baseline,
        target=1.3,
        note=f"store.append of a prebuilt {len(batch)}-event turn (new session) into the 10,000-session store with "
        "its search triggers vs a copy without them",
    )


def figures(workdir: Path) -> Iterator[Figure]:
    yield from search_figures(workdir)
