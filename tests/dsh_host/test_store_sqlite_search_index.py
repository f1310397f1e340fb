"""The SQLite store's search index: contentless and keyed by surface position, kept exactly by
every kind of write, and built in place of the older layout (schema versions 2 and 3) on first
open, whole or not at all; the ranking keys likewise, added to a version 4 database on first open.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session
from dsh_host.store.search import searchable_condition
from dsh_host.store.sqlite import SCHEMA_VERSION, SqliteSessionStore, connection, schema, search

# Its logs are built by hand (turnless fixtures), not written by dsh.
pytestmark = pytest.mark.foreign_logs

USER = {"kind": "user"}
CHECKPOINT = dict(COMPACT_CHECKPOINT_SOURCE)
FOLD = connection.FOLD_FUNCTION

# The search objects of schema versions 2 and 3, as they created them: an FTS5 table keeping its own copy
# of each node's text, keyed by the node's event key.
_OLD_SEARCH_SCHEMA = f"""
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
    VALUES (new.pk, {FOLD}(new.id), {FOLD}(new.title), {FOLD}(new.cwd));
END;
CREATE TRIGGER session_names_title AFTER UPDATE OF title ON sessions WHEN new.title IS NOT old.title BEGIN
    UPDATE session_names SET title = {FOLD}(new.title) WHERE rowid = new.pk;
END;
CREATE TRIGGER session_names_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM session_names WHERE rowid = old.pk;
END;
"""
_OLD_FILL = (
    "INSERT INTO session_names (rowid, id, title, cwd) "
    f"SELECT pk, {FOLD}(id), {FOLD}(title), {FOLD}(cwd) FROM sessions",
    "INSERT INTO surface_fts (rowid, text) SELECT (session_pk << 32) | seq, text FROM surface "
    f"WHERE {searchable_condition('')}",
)


def text(value: str) -> list[dict]:
    return [{"type": "text", "text": value}]


def say(session: Session, *prompts: str) -> list[int]:
    """Append a user message per prompt; their seqs."""
    return [
        session.append("user/message", {"content": text(prompt), "source": USER}, surface_op="append").seq
        for prompt in prompts
    ]


def compact(session: Session, shadowed: list[int], summary: str) -> None:
    """Replace the run of surface nodes `shadowed` (their seqs, in order) with a checkpoint."""
    session.append(
        "user/message",
        {"content": text(summary), "source": CHECKPOINT},
        surface_op={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        sources=shadowed,
    )


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection to the store's file, with the function its triggers call."""
    conn = sqlite3.connect(path, isolation_level=None)
    connection.register_fold(conn)
    return conn


def postings(conn: sqlite3.Connection) -> list[tuple]:
    """Every (word, key, position) the body index holds."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.postings USING fts5vocab(main, surface_fts, instance)")
    return conn.execute("SELECT term, doc, offset FROM temp.postings ORDER BY term, doc, offset").fetchall()


def postings_of(path: Path) -> list[tuple]:
    """Every (word, key, position) the body index of the (closed) database at `path` holds."""
    conn = raw(path)
    try:
        return postings(conn)
    finally:
        conn.close()


def freshly_built_postings(path: Path, scratch: Path) -> list[tuple]:
    """What the body index of the (closed) database at `path` holds when built anew over its surface."""
    shutil.copyfile(path, scratch)
    conn = raw(scratch)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("PRAGMA user_version = 3")  # the version before that differs in search alone
        schema.upgrade(conn, None)
        conn.execute("COMMIT")
        return postings(conn)
    finally:
        conn.close()


@given(pk=st.integers(1, (1 << 30) - 1), ord_=st.integers(0, (1 << 32) - 1))
def test_a_search_key_names_its_node(pk, ord_):
    conn = sqlite3.connect(":memory:")
    node = "(SELECT ? AS session_pk, ? AS ord)"
    (key,) = conn.execute(f"SELECT {search.node_key_sql('')} FROM {node}", (pk, ord_)).fetchone()
    conn.close()
    assert 0 < key < 1 << 63
    assert search.node_of_key(key) == (pk, ord_)


def test_the_body_index_keeps_no_copy_of_the_text(tmp_path):
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore.open(path)
    session = Session(SessionHeader(id="s", created_at=0, cwd="/w"))
    say(session, "the walrus said hello")
    store.append(session.header, list(session.events))
    (row,) = store.search_candidates("walrus", target_id=None, target_cwd="/w", limit=5)
    store.close()
    assert row.snippet == "the walrus said hello"
    conn = raw(path)
    try:
        assert conn.execute("SELECT text FROM surface_fts").fetchall() == [(None,)]
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert "surface_fts_content" not in tables and "surface_fts_docsize" in tables
    finally:
        conn.close()


def test_every_kind_of_write_keeps_the_index_as_a_fresh_build_would(tmp_path):
    """Appends past the 256 positions of narrow keys, compactions on either side of that edge and
    across it, text only storable as bytes, a replaced import and a deleted session."""
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore.open(path)
    long = Session(SessionHeader(id="long", created_at=1, cwd="/w"))
    seqs = say(long, *(f"note{i} about walrus{i % 7} and tusk" for i in range(300)))
    store.append(long.header, list(long.events))
    written = len(long.events)
    compact(long, seqs[10:21], "first summary of otters")
    compact(long, seqs[250:261], "summary across the edge of seals")
    compact(long, seqs[280:291], "late summary of narwhals")
    say(long, "one more \ud800 surrogate walrus", "and the last word")
    store.append(long.header, long.events[written:])
    short = Session(SessionHeader(id="short", created_at=2, cwd="/w"))
    say(short, "walrus tusk", "lone \udfff walrus")
    store.append(short.header, list(short.events))
    gone = Session(SessionHeader(id="gone", created_at=3, cwd="/w"))
    say(gone, "walrus soon gone")
    store.append(gone.header, list(gone.events))
    store.delete("gone")
    replaced = Session(SessionHeader(id="replaced", created_at=4, cwd="/w"))
    say(replaced, "walrus replaced")
    store.append(replaced.header, list(replaced.events))
    store.import_log(replaced.header, [], replace=True)

    def snippets(query: str) -> list[tuple[str, str | None]]:
        return [(r.id, r.snippet) for r in store.search_candidates(query, target_id=None, target_cwd="/w", limit=50)]

    assert snippets("note5") == [("long", "note5 about walrus5 and tusk")]
    assert snippets("note255") == snippets("note15") == []
    assert snippets("note299") == [("long", "note299 about walrus5 and tusk")]
    assert snippets("note261") == [("long", "note261 about walrus2 and tusk")]
    assert snippets("seals") == [("long", "summary across the edge of seals")]
    assert snippets("narwhals") == [("long", "late summary of narwhals")]
    assert snippets("surrogate") == [("long", "one more \ud800 surrogate walrus")]
    assert snippets("lone") == [("short", "lone \udfff walrus")]
    assert [id_ for id_, _ in snippets("walrus")] == ["short", "long"]
    store.close()

    held = postings_of(path)
    assert held == freshly_built_postings(path, tmp_path / "fresh.sqlite3")
    keys = {doc for _, doc, _ in held}
    assert min(keys) < 1 << 62 <= max(keys)  # both ranges of keys were written


def rank_keys(conn: sqlite3.Connection) -> list[tuple]:
    """(pk, cwd, created_at) of every session as `session_rank` holds them."""
    return conn.execute(
        "SELECT r.pk, c.cwd, r.created_at FROM session_rank AS r LEFT JOIN session_cwds AS c ON c.code = r.cwd_code "
        "ORDER BY r.pk"
    ).fetchall()


def session_keys(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute("SELECT pk, cwd, created_at FROM sessions ORDER BY pk").fetchall()


def test_the_ranking_keys_follow_every_write_of_a_session(tmp_path):
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore.open(path)
    for i, cwd in enumerate(["/w", None, "/w", "/lone \udcff", "/v", "/w"]):
        session = Session(SessionHeader(id=f"s{i}", created_at=10 - i, cwd=cwd))
        say(session, "walrus")
        store.append(session.header, list(session.events))
    store.delete("s4")
    replaced = Session(SessionHeader(id="s2", created_at=10 - 2, cwd="/w"))
    store.import_log(replaced.header, [], replace=True)
    store.close()
    conn = raw(path)
    try:
        held = rank_keys(conn)
        assert held == session_keys(conn) and len(held) == 5
        cwds = [cwd for (cwd,) in conn.execute("SELECT cwd FROM session_cwds ORDER BY code")]
        # Each once, as stored (bytes for a lone surrogate); a deleted session's stays.
        assert cwds == ["/w", "/lone \udcff".encode("utf-8", "surrogatepass"), "/v"]
    finally:
        conn.close()


# -- upgrading a database of the older layout ----------------------------------------------------------

SESSIONS = 24


def store_sessions(path: Path) -> list[list]:
    """SESSIONS titled sessions, each with a few messages (one long) and one compacted; what the
    store answers `QUERIES` with."""
    store = SqliteSessionStore.open(path)
    filler = " ".join(f"filler{j}" for j in range(400))
    for i in range(SESSIONS):
        session = Session(SessionHeader(id=f"s{i:02d}", created_at=i, cwd="/w" if i % 2 else "/v"))
        session.append("session/title", {"title": f"Title {i}", "messageSeqs": [], "source": USER})
        first, *_ = say(session, f"walrus number{i}", f"otter {filler} number{i}", f"tusk number{i} walrus")
        compact(session, [first], f"summary of seals {i}")
        store.append(session.header, list(session.events))
    try:
        return answers(store)
    finally:
        store.close()


QUERIES = ("walrus", "seals", "number7", "otter filler3", "title 1", "s0", "")


def answers(store: SqliteSessionStore) -> list[list]:
    return [store.search_candidates(query, target_id=None, target_cwd="/w", limit=50) for query in QUERIES]


def as_old_version(path: Path, version: int) -> None:
    """Turn the (closed) database into schema `version` (2 or 3): the older search tables and
    triggers, filled as those versions filled them, and (version 2) no last activity."""
    conn = raw(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        search.drop_indexes(conn)
        for statement in schema._statements(_OLD_SEARCH_SCHEMA):
            conn.execute(statement)
        for statement in _OLD_FILL:
            conn.execute(statement)
        if version == 2:
            for index in ("sessions_by_activity", "sessions_by_cwd"):  # version 6's, on the column
                conn.execute(f"DROP INDEX {index}")
            conn.execute("ALTER TABLE sessions DROP COLUMN last_activity_at")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def assert_old_version_whole(path: Path, version: int) -> None:
    conn = raw(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # FTS5 checks its index against the copy of the text the older layout keeps.
        conn.execute("INSERT INTO surface_fts (surface_fts) VALUES ('integrity-check')")
        assert conn.execute("SELECT count(*) FROM surface_fts WHERE surface_fts MATCH 'tusk'").fetchone() == (SESSIONS,)
    finally:
        conn.close()


def assert_upgraded_answering(path: Path, expected: list[list], progress: schema.Progress | None = None) -> None:
    """Opening the (closed) database upgrades it whole to the current version, answering `expected`."""
    store = SqliteSessionStore.open(path, progress=progress)
    try:
        assert answers(store) == expected
    finally:
        store.close()
    conn = raw(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_database_gets_the_new_layout_on_first_open(tmp_path, monkeypatch, version):
    path = tmp_path / "sessions.sqlite3"
    expected = store_sessions(path)
    as_old_version(path, version)
    assert_old_version_whole(path, version)
    monkeypatch.setattr(search, "FILL_BATCH_SESSIONS", 10)
    seen: list[tuple[int, int]] = []

    assert_upgraded_answering(path, expected, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(10, SESSIONS), (20, SESSIONS), (SESSIONS, SESSIONS)]
    conn = raw(path)
    try:
        assert "surface_fts_content" not in {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert postings(conn) == freshly_built_postings(path, tmp_path / "fresh.sqlite3")
    finally:
        conn.close()
    seen.clear()
    SqliteSessionStore.open(path, progress=lambda done, total: seen.append((done, total))).close()
    assert seen == []  # upgraded once


def test_a_version_4_database_gets_the_ranking_keys_on_first_open(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    expected = store_sessions(path)
    conn = raw(path)
    try:
        before = postings(conn)
        conn.execute("BEGIN IMMEDIATE")
        for statement in ("DROP TRIGGER session_rank_insert", "DROP TRIGGER session_rank_delete"):
            conn.execute(statement)
        for statement in ("DROP TABLE session_rank", "DROP TABLE session_cwds", "PRAGMA user_version = 4"):
            conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()

    assert_upgraded_answering(path, expected)
    conn = raw(path)
    try:
        assert rank_keys(conn) == session_keys(conn) and len(session_keys(conn)) == SESSIONS
        assert postings(conn) == before  # the body index is kept as it was, not built anew
    finally:
        conn.close()


# Opens the database at argv[1] and kills itself halfway through the upgrade's indexing, with a
# page cache so small that the upgrade's pages have gone to the WAL file by then.
_KILLED_UPGRADE = """
import os, signal, sys
from dsh_host.store.sqlite import SqliteSessionStore, search, store

search.FILL_BATCH_SESSIONS = 1
connect = store.connect

def small_cache(path):
    conn = connect(path)
    conn.execute("PRAGMA cache_size = 2")
    return conn

def die_halfway(done, total):
    if 2 * done >= total:
        os.kill(os.getpid(), signal.SIGKILL)

store.connect = small_cache
SqliteSessionStore.open(sys.argv[1], progress=die_halfway)
"""


def test_a_process_killed_while_upgrading_leaves_the_old_version_whole_for_the_next_open_to_upgrade(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    expected = store_sessions(path)
    as_old_version(path, 3)
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0

    killed = subprocess.run([sys.executable, "-c", _KILLED_UPGRADE, str(path)], capture_output=True, text=True)

    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert wal.stat().st_size > 0  # the upgrade had written part of its work
    assert_old_version_whole(path, 3)
    assert_upgraded_answering(path, expected)
    assert postings_of(path) == freshly_built_postings(path, tmp_path / "fresh.sqlite3")


def node_ranks(path: Path, query: str) -> dict[tuple[int, int], float]:
    """The BM25 rank of each node (session pk, seq) the body index matches, in either layout."""
    conn = raw(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        matched = conn.execute("SELECT rowid, rank FROM surface_fts WHERE surface_fts MATCH ?", (query,)).fetchall()
        if version < SCHEMA_VERSION:  # the older layout, keyed by event: pk << 32 | seq
            return {(key >> 32, key & 0xFFFFFFFF): rank for key, rank in matched}
        seq_of = "SELECT seq FROM surface WHERE session_pk = ? AND ord = ?"
        return {
            (pk, conn.execute(seq_of, (pk, ord_)).fetchone()[0]): rank
            for (pk, ord_), rank in ((search.node_of_key(key), rank) for key, rank in matched)
        }
    finally:
        conn.close()


def test_the_new_layout_ranks_every_node_as_the_old_one_did(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    store_sessions(path)
    as_old_version(path, 3)
    queries = ("walrus", "seals", "number7", "otter filler3", "tusk walrus")
    before = [node_ranks(path, query) for query in queries]
    assert all(before)

    SqliteSessionStore.open(path).close()

    assert [node_ranks(path, query) for query in queries] == before
