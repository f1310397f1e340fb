"""PostgreSQL for the tests: a fresh database per test on the server `DSH_TEST_POSTGRES_DSN` names.

`.ci/run` starts a throwaway cluster on loopback (`.ci/postgres start DIR`) and exports that
variable: a superuser DSN that only these fixtures use, to create roles and databases. The
store itself never connects as a superuser. Without the variable the PostgreSQL tests skip
(with `CI` set they fail instead). Passwords reach libpq through a pgpass file written here,
as a team member's would.

Fixtures (registered for every test through tests/conftest.py):

- `postgres_server` (session): the server, with `role(...)` to create login or group roles.
- `postgres_database`: a fresh database with the dsh schema, owned by its own role, and an
  ordinary login role `user` to open stores as (`database.dsn(role)`, `database.open(role)`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DSN_VARIABLE = "DSH_TEST_POSTGRES_DSN"


def require_dsn() -> str:
    """The admin DSN, or skip (locally) / fail (in CI) naming what is missing."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    reason = f'no PostgreSQL server: set {DSN_VARIABLE} (eval "$(.ci/postgres start DIR)" starts one)'
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must provide one")
    pytest.skip(reason)


@dataclass
class PostgresServer:
    """The test server: an admin connection and the roles made for this run."""

    admin_dsn: str
    pgpass: Path
    run: str = field(default_factory=lambda: secrets.token_hex(3))
    roles: list[str] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)
    _counter: itertools.count = field(default_factory=itertools.count)

    def admin(self, dbname: str | None = None):
        import psycopg

        params = {"dbname": dbname} if dbname else {}
        return psycopg.connect(self.admin_dsn, autocommit=True, **params)

    @property
    def host_port(self) -> tuple[str, int]:
        with self.admin() as conn:
            return conn.info.host, conn.info.port

    def name(self, stem: str) -> str:
        """A name unique to this run (roles are cluster-wide and may outlive a crashed run)."""
        return f"dsh_{self.run}_{stem}_{next(self._counter)}"

    def role(self, stem: str, *, login: bool = True, member_of: tuple[str, ...] = (), options: str = "") -> str:
        """Create a role (login ones get a password in the pgpass file); returns its name."""
        name = self.name(stem)
        clauses = []
        password = None
        if login:
            password = secrets.token_hex(8)
            clauses.append(f"LOGIN PASSWORD '{password}'")
        if member_of:
            clauses.append("IN ROLE " + ", ".join(member_of))
        with self.admin() as conn:
            conn.execute(f"CREATE ROLE {name} {' '.join(clauses)} {options}")
        self.roles.append(name)
        if password is not None:
            host, port = self.host_port
            with self.pgpass.open("a") as fh:
                fh.write(f"{host}:{port}:*:{name}:{password}\n")
        return name

    def dsn(self, dbname: str, role: str) -> str:
        host, port = self.host_port
        return f"host={host} port={port} dbname={dbname} user={role}"

    def database(self) -> Database:
        """A fresh database with the dsh schema, and an ordinary role `user` to use it as."""
        from dsh_host.store.postgres import init_schema

        owner = self.role("owner")
        dbname = self.name("db")
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {dbname} OWNER {owner}")
        self.databases.append(dbname)
        database = Database(self, dbname, owner, self.role("user"))
        init_schema(database.dsn(owner))
        return database

    def drop(self, dbname: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")

    def cleanup(self) -> None:
        with self.admin() as conn:
            for dbname in self.databases:
                conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
            for role in reversed(self.roles):
                with contextlib.suppress(Exception):
                    conn.execute(f"DROP ROLE IF EXISTS {role}")


@dataclass
class Database:
    """A test database: its name, the owner role that ran `dsh store init`, and a user role."""

    server: PostgresServer
    name: str
    owner: str
    user: str

    def dsn(self, role: str | None = None) -> str:
        return self.server.dsn(self.name, role or self.user)

    def open(self, role: str | None = None):
        from dsh_host.store.postgres import PostgresSessionStore

        return PostgresSessionStore.open(self.dsn(role))

    def admin(self):
        """A superuser connection to this database (it bypasses row-level security)."""
        return self.server.admin(self.name)


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory) -> Iterator[PostgresServer]:
    """The PostgreSQL server for this run (skips or fails without one, see `require_dsn`)."""
    dsn = require_dsn()
    pgpass = tmp_path_factory.mktemp("pgpass") / "pgpass"
    pgpass.touch(mode=0o600)
    server = PostgresServer(dsn, pgpass)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PGPASSFILE", str(pgpass))
        mp.delenv("PGPASSWORD", raising=False)
        yield server
        server.cleanup()


@pytest.fixture
def postgres_database(postgres_server) -> Iterator[Database]:
    """A fresh database with the dsh schema (dropped afterwards)."""
    database = postgres_server.database()
    yield database
    postgres_server.drop(database.name)
