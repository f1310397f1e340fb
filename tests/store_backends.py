"""The stores the store contract tests run against, behind one small interface.

`store_backend` is parametrized over `sqlite` and `postgres`: a test taking it runs once per
store. Each backend opens handles onto one backing database and offers the few things a test
needs to look inside (the SQL a call ran, whether it read rows by key, overwriting stored lines).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_host.store.sqlite import SqliteSessionStore

BACKENDS = ["sqlite", "postgres"]


class SqliteBackend:
    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "data" / "sessions.sqlite3"

    def open(self) -> SqliteSessionStore:
        return SqliteSessionStore.open(self.path)

    @contextlib.contextmanager
    def trace(self, store: SqliteSessionStore) -> Iterator[list[tuple[str, Any]]]:
        """The statements the store runs on this thread, as (sql, None)."""
        statements: list[str] = []
        traced: list[tuple[str, Any]] = []
        conn = store._connection()
        conn.set_trace_callback(statements.append)
        try:
            yield traced
        finally:
            conn.set_trace_callback(None)
            traced.extend((s, None) for s in statements)

    def table_accesses(self, store: SqliteSessionStore, traced: list[tuple[str, Any]]) -> list[str]:
        """How each traced SELECT reaches each table: `SEARCH ...` (by key) or `SCAN ...`."""
        conn = store._connection()
        plans = []
        for statement, _ in traced:
            if statement.lstrip().upper().startswith("SELECT"):
                rows = conn.execute("EXPLAIN QUERY PLAN " + statement, [None] * statement.count("?")).fetchall()
                plans.extend(row[-1] for row in rows)
        return plans

    def keyed(self, access: str) -> bool:
        return access.startswith("SEARCH") and "TEMP B-TREE" not in access

    def index_ordered(self, store: SqliteSessionStore, traced: list[tuple[str, Any]], index: str) -> bool:
        """Whether every traced SELECT reads its rows through `index`, in its order (no sort)."""
        plans = self.table_accesses(store, traced)
        return bool(plans) and all(f"INDEX {index}" in step and "TEMP B-TREE" not in step for step in plans)

    def corrupt_lines(self, store: SqliteSessionStore, session_id: str, seqs: list[int]) -> None:
        conn = sqlite3.connect(store.path)
        (pk,) = conn.execute("SELECT pk FROM sessions").fetchone()
        with conn:
            conn.executemany("UPDATE events SET line = '{corrupt' WHERE key = ?", [((pk << 32) | s,) for s in seqs])
        conn.close()

    def pad(self, events: int) -> None:
        """Nothing: SQLite's planner picks keyed access whatever the table sizes."""


class PostgresBackend:
    name = "postgres"

    def __init__(self, database: Any) -> None:
        self.database = database

    def open(self) -> Any:
        return self.database.open()

    @contextlib.contextmanager
    def trace(self, store: Any) -> Iterator[list[tuple[str, Any]]]:
        """The statements the store runs, as (sql, params), from every connection of its pool."""
        import psycopg

        traced: list[tuple[str, Any]] = []
        original = psycopg.Connection.execute

        def execute(conn, query, params=None, **kwargs):
            traced.append((query, params))
            return original(conn, query, params, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(psycopg.Connection, "execute", execute)
            yield traced

    def table_accesses(self, store: Any, traced: list[tuple[str, Any]]) -> list[str]:
        """`<node type> <table>` for every table access of every traced SELECT's plan."""
        import psycopg

        accesses: list[str] = []
        with psycopg.connect(self.database.dsn(), autocommit=True) as conn:
            for statement, params in traced:
                if statement.lstrip().upper().startswith("SELECT"):
                    (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
                    accesses.extend(_accesses(plan[0]["Plan"]))
        return accesses

    def keyed(self, access: str) -> bool:
        # A bitmap heap scan fetches exactly the rows its index scan found.
        return access.startswith(("Index Scan ", "Index Only Scan ", "Bitmap Heap Scan "))

    def index_ordered(self, store: Any, traced: list[tuple[str, Any]], index: str) -> bool:
        """Whether every traced SELECT on a session table is a scan of `index` under a limit, with no sort."""
        import psycopg

        plans = []
        with psycopg.connect(self.database.dsn(), autocommit=True) as conn:
            for statement, params in traced:
                if statement.lstrip().upper().startswith("SELECT") and "dsh.sessions" in statement:
                    (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
                    plans.append(plan[0]["Plan"])
        return bool(plans) and all(
            plan["Node Type"] == "Limit"
            and [(n["Node Type"], n.get("Index Name")) for n in _nodes(plan)[1:]] == [("Index Scan", index)]
            for plan in plans
        )

    def corrupt_lines(self, store: Any, session_id: str, seqs: list[int]) -> None:
        with self.database.admin() as conn:
            conn.execute(
                "UPDATE dsh.events SET line = '{corrupt' WHERE session_pk = "
                "(SELECT pk FROM dsh.sessions WHERE id = %s) AND seq = ANY(%s)",
                (session_id.encode("utf-8", "surrogatepass"), seqs),
            )

    def pad(self, events: int) -> None:
        """Other roles' sessions (a thousand, one of `events` events), so the planner sees tables of
        a real size."""
        with self.database.admin() as conn:
            conn.execute("SET session_replication_role = replica")  # rows of a role that is not there
            conn.execute(
                "INSERT INTO dsh.sessions (id, owner, created_at, header, next_seq, next_ord, last_activity_at) "
                "SELECT int4send(g), 'nobody', 0, '{}', 0, 0, 0 FROM generate_series(1, 1000) g"
            )
            (pk,) = conn.execute("SELECT pk FROM dsh.sessions WHERE id = int4send(1)").fetchone()
            conn.execute("INSERT INTO dsh.events SELECT %s, g, '{}' FROM generate_series(0, %s - 1) g", (pk, events))
            conn.execute(
                "INSERT INTO dsh.surface (session_pk, ord, seq, type, text) SELECT %s, g, 2 * g, 'x', '' "
                "FROM generate_series(0, %s - 1) g",
                (pk, events // 2),
            )
            conn.execute("ANALYZE")


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A plan node and every node below it, depth first."""
    return [node, *(below for child in node.get("Plans", ()) for below in _nodes(child))]


def _accesses(node: dict[str, Any]) -> Iterator[str]:
    if "Relation Name" in node:
        yield f"{node['Node Type']} {node['Relation Name']}"
    for child in node.get("Plans", ()):
        yield from _accesses(child)


def store_config(path: Path, backend: SqliteBackend | PostgresBackend, *, plugins: tuple[str, ...] = ()) -> Path:
    """Write a dsh configuration file that selects `backend`'s store (and mounts `plugins`)."""
    lines = ["[host]", f"plugins = {json.dumps(list(plugins))}", f"data_dir = {json.dumps(str(path.parent))}"]
    if backend.name == "sqlite":
        lines += ['store = "sqlite"', "[stores.sqlite]", f"path = {json.dumps(str(backend.path))}"]
    else:
        lines += ['store = "postgres"', "[stores.postgres]", f"dsn = {json.dumps(backend.database.dsn())}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def make_backend(name: str, directory: Path, request: pytest.FixtureRequest) -> SqliteBackend | PostgresBackend:
    if name == "sqlite":
        return SqliteBackend(directory)
    server = request.getfixturevalue("postgres_server")
    database = server.database()
    request.addfinalizer(lambda: server.drop(database.name))
    return PostgresBackend(database)


@pytest.fixture(params=BACKENDS)
def store_backend(request, tmp_path) -> SqliteBackend | PostgresBackend:
    """Each store in turn (a fresh, empty one per test)."""
    return make_backend(request.param, tmp_path, request)


@pytest.fixture
def store(store_backend) -> Iterator:
    """An open store of each backend in turn, closed at teardown."""
    opened = store_backend.open()
    yield opened
    opened.close()


@pytest.fixture(scope="module", params=BACKENDS)
def shared_store(request, tmp_path_factory) -> Iterator:
    """One store per backend for a whole module (property tests write sessions of fresh ids)."""
    opened = make_backend(request.param, tmp_path_factory.mktemp("shared"), request).open()
    yield opened
    opened.close()
