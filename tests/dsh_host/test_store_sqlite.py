"""SqliteSessionStore beyond the store contract (tests/dsh_host/test_store_contract.py): its files,
its place under DSH_HOME, databases that are not ours or from the future, ids never reaching a path."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import SessionHeader
from dsh_host.store.base import StoreError
from dsh_host.store.sqlite import SCHEMA_VERSION, SqliteSessionStore
from tests.dsh_host.test_store_contract import store_awkward_ids

# Its logs are built by hand (turnless fixtures, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs


def test_directory_is_0700_and_database_files_0600(tmp_path, log_builder):
    data_dir = tmp_path / "deep" / "dsh"
    store = SqliteSessionStore.open(data_dir / "sessions.sqlite3")
    try:
        store.append(SessionHeader(id="s", created_at=0), log_builder.events([log_builder.raw("turn/start", 0)]))
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        files = sorted(p.name for p in data_dir.iterdir())
        assert "sessions.sqlite3" in files
        for name in files:
            assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600, name
        assert sqlite3.connect(data_dir / "sessions.sqlite3").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_the_lock_folder_is_made_private_at_the_first_lease_and_again_if_removed(tmp_path):
    store = SqliteSessionStore.open(tmp_path / "sessions.sqlite3")
    folder = tmp_path / "sessions.sqlite3-leases"
    try:
        assert not folder.exists()  # opening a store takes no lease
        store.lease("a").release()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        folder.rmdir()
        lease = store.lease("b")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and len(list(folder.iterdir())) == 1
        lease.release()
        assert list(folder.iterdir()) == []
    finally:
        store.close()


def test_the_host_keeps_its_store_under_dsh_home(tmp_path, log_builder):
    home = tmp_path / "home"
    with Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}, cwd=tmp_path)) as host:
        host.store.append(SessionHeader(id="s", created_at=0), log_builder.events([log_builder.raw("turn/start", 0)]))
        assert host.store.path == home / "sessions.sqlite3"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(os.urandom(8192))
    before = _digest(path)
    with pytest.raises(StoreError, match="not a dsh session store"):
        SqliteSessionStore.open(path)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.sqlite3"]


def test_a_store_from_the_future_is_refused_and_left_untouched(tmp_path, log_builder):
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore.open(path)
    store.append(SessionHeader(id="s", created_at=0), log_builder.events([log_builder.raw("turn/start", 0)]))
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="schema version 99, newer than this dsh supports"):
        SqliteSessionStore.open(path)
    assert _digest(path) == before
    with pytest.raises(StoreError, match="schema version 99"):
        Host.start(load_config(env={"DSH_HOME": str(tmp_path), "DSH_LOAD_PLUGINS": ""}, cwd=tmp_path)).store  # noqa: B018
    assert _digest(path) == before


def test_another_applications_sqlite_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="not a dsh session store"):
        SqliteSessionStore.open(path)
    assert _digest(path) == before


def test_an_empty_file_becomes_a_new_store(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    path.touch()
    store = SqliteSessionStore.open(path)
    assert store.list_sessions() == []
    store.close()
    SqliteSessionStore.open(path).close()  # and reopens fine


def test_awkward_session_ids_never_reach_a_path(tmp_path, log_builder):
    data_dir = tmp_path / "data"
    store = SqliteSessionStore.open(data_dir / "sessions.sqlite3")
    try:
        store_awkward_ids(store, log_builder)
    finally:
        store.close()
    assert {p.name for p in tmp_path.rglob("*")} <= {
        "data",
        "sessions.sqlite3",
        "sessions.sqlite3-wal",
        "sessions.sqlite3-shm",
    }


def _as_version_5(path: Path) -> None:
    """Turn a database into schema version 5: without the indexes of the listing by last activity."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP INDEX sessions_by_activity")
        conn.execute("DROP INDEX sessions_by_cwd")
        conn.execute("PRAGMA user_version = 5")
    conn.close()


def _as_version_2(path: Path) -> None:
    """Turn a database into schema version 2 as far as the last activity goes (none); the older search
    layout of versions 2 and 3 is test_store_sqlite_search_index's."""
    _as_version_5(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN last_activity_at")
        conn.execute("PRAGMA user_version = 2")
    conn.close()


def _as_version_1(path: Path) -> None:
    """Turn a database into what schema version 1 was: version 2 without search tables or triggers."""
    _as_version_2(path)
    conn = sqlite3.connect(path)
    with conn:
        for kind, name in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type = 'trigger' OR name IN ('surface_fts', 'session_names')"
        ).fetchall():
            conn.execute(f"DROP {'TRIGGER' if kind == 'trigger' else 'TABLE'} {name}")
        conn.execute("PRAGMA user_version = 1")
    conn.close()


def _store_walruses(path: Path) -> None:
    """Five sessions s0..s4 in cwd /w, titled "Title i", each saying "walrus number<i>" at time 100 + i."""
    from dsh_host.session.session import Session

    store = SqliteSessionStore.open(path)
    for i in range(5):
        session = Session(SessionHeader(id=f"s{i}", created_at=i, cwd="/w"), clock=lambda i=i: 100 + i)
        session.append("session/title", {"title": f"Title {i}", "messageSeqs": [], "source": {"kind": "user"}})
        content = [{"type": "text", "text": f"walrus number{i}"}]
        session.append("user/message", {"content": content, "source": {"kind": "user"}}, surface_op="append")
        store.append(session.header, list(session.events))
    store.close()


def _assert_walruses_found(store: SqliteSessionStore) -> None:
    rows = store.search_candidates("walrus", target_id=None, target_cwd="/w", limit=10)
    assert [(r.id, r.title, r.snippet) for r in rows] == [
        (f"s{i}", f"Title {i}", f"walrus number{i}") for i in reversed(range(5))
    ]
    assert [r.id for r in store.search_candidates("title 3", target_id=None, target_cwd=None, limit=10)] == ["s3"]


def test_a_version_1_database_gets_the_search_indexes_on_first_open(tmp_path, monkeypatch):
    from dsh_host.store.sqlite import search

    path = tmp_path / "sessions.sqlite3"
    _store_walruses(path)
    _as_version_1(path)
    monkeypatch.setattr(search, "FILL_BATCH_SESSIONS", 2)
    seen: list[tuple[int, int]] = []

    store = SqliteSessionStore.open(path, progress=lambda done, total: seen.append((done, total)))
    try:
        assert seen == [(2, 5), (4, 5), (5, 5)]
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        _assert_walruses_found(store)
        assert [row.last_activity_at for row in store.list_sessions()] == [104, 103, 102, 101, 100]
    finally:
        store.close()
    seen.clear()
    SqliteSessionStore.open(path, progress=lambda done, total: seen.append((done, total))).close()
    assert seen == []  # upgraded once


def test_a_version_2_database_gets_each_sessions_last_activity_on_first_open(tmp_path, log_builder):
    L = log_builder
    path = tmp_path / "sessions.sqlite3"
    _store_walruses(path)
    store = SqliteSessionStore.open(path)
    store.import_log(SessionHeader(id="empty", created_at=50), [])  # no event: its creation time
    store.append(SessionHeader(id="broken", created_at=60), L.events([L.raw("turn/start", 0, time=70)]))
    store.close()
    conn = sqlite3.connect(path)
    with conn:  # an unreadable last line counts as no event: its creation time too
        conn.execute(
            "UPDATE events SET line = '{corrupt' WHERE key = (SELECT pk << 32 FROM sessions WHERE id = ?)", (b"broken",)
        )
    conn.close()
    _as_version_2(path)

    store = SqliteSessionStore.open(path)
    try:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [(row.id, row.last_activity_at) for row in store.list_sessions()] == [
            ("broken", 60),
            ("empty", 50),
            *((f"s{i}", 100 + i) for i in reversed(range(5))),
        ]
        _assert_walruses_found(store)
    finally:
        store.close()


def test_a_version_5_database_gets_the_indexes_of_the_listing_by_activity_on_first_open(tmp_path, log_builder):
    path = tmp_path / "sessions.sqlite3"
    _store_walruses(path)
    _as_version_5(path)

    store = SqliteSessionStore.open(path)
    try:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        conn.close()
        assert {"sessions_by_activity", "sessions_by_cwd"} <= indexes
        assert [row.id for row in store.list_sessions_by_activity(2, cwd="/w")] == ["s4", "s3"]
        _assert_walruses_found(store)  # the search indexes are left as they were
    finally:
        store.close()


class _FailingConnection(sqlite3.Connection):
    """A connection whose ranking statement fails, and so does ending its transaction."""

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if "surface_fts MATCH" in sql:
            raise sqlite3.OperationalError("the ranking failed")
        if sql in ("COMMIT", "ROLLBACK"):
            raise sqlite3.OperationalError("ending the transaction failed")
        return super().execute(sql, *args)


def test_a_search_error_is_not_hidden_by_ending_its_transaction(tmp_path):
    from dsh_host.store.sqlite import connection, search

    path = tmp_path / "sessions.sqlite3"
    _store_walruses(path)
    conn = sqlite3.connect(path, isolation_level=None, factory=_FailingConnection)
    connection.register_fold(conn)
    try:
        with pytest.raises(sqlite3.OperationalError, match="the ranking failed"):
            search.search(conn, "walrus", target_id=None, target_cwd="/w", limit=10, cancel=None)
    finally:
        conn.close()


def test_a_search_reads_the_sessions_it_returns_in_batches(tmp_path, monkeypatch):
    from dsh_host.store.sqlite import search

    path = tmp_path / "sessions.sqlite3"
    _store_walruses(path)
    store = SqliteSessionStore.open(path)
    try:
        whole = store.search_candidates("walrus", target_id=None, target_cwd="/w", limit=10)
        monkeypatch.setattr(search, "_LISTED_BATCH", 2)
        assert store.search_candidates("walrus", target_id=None, target_cwd="/w", limit=10) == whole
        assert [(row.id, row.snippet) for row in whole] == [(f"s{i}", f"walrus number{i}") for i in reversed(range(5))]
    finally:
        store.close()


def test_a_database_another_process_creates_meanwhile_is_never_taken_for_a_foreign_one(tmp_path):
    """The version check reads the file in one snapshot, so a schema committed between its reads
    (as a `dsh acp` starting beside a reader does) shows as all there or not yet there."""
    from dsh_host.store.sqlite import schema

    path = tmp_path / "sessions.sqlite3"
    sqlite3.connect(path).close()
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)

    def create_between_reads(statement: str) -> None:
        if statement.startswith("PRAGMA application_id"):
            try:
                writer.execute("BEGIN IMMEDIATE")
                schema.create(writer)
                writer.execute("COMMIT")
            except sqlite3.OperationalError:  # the reader's snapshot holds the file: commit later
                writer.execute("ROLLBACK")

    reader.set_trace_callback(create_between_reads)
    try:
        assert schema.version_of(reader, path) in (None, SCHEMA_VERSION)
    finally:
        reader.close()
        writer.close()
