"""A PostgreSQL server for tests: fresh databases with the dsh schema, and roles to use them as.

`PostgresServer(admin_dsn, pgpass)` wraps a server reached with a superuser DSN (only these
helpers use it, to create roles and databases; the store never connects as a superuser). Login
roles get random passwords written to the `pgpass` file, which libpq reads when `PGPASSFILE`
names it, as a team member's client would. `.ci/postgres start DIR` starts a throwaway cluster
on loopback and prints that DSN as `DSH_TEST_POSTGRES_DSN`; the pytest plugin's
`postgres_server` and `postgres_database` fixtures use it. Needs `dsh-host[postgres]`.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from dsh_host.store.postgres import PostgresSessionStore

DSN_VARIABLE = "DSH_TEST_POSTGRES_DSN"
"""The environment variable holding the test server's superuser DSN."""


@dataclass
class PostgresServer:
    """The test server: an admin connection and the roles made for this run."""

    admin_dsn: str
    pgpass: Path
    run: str = field(default_factory=lambda: secrets.token_hex(3))
    roles: list[str] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def admin(self, dbname: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
        """A superuser connection (autocommit), to the admin DSN's database or to `dbname`."""
        import psycopg

        params = {"dbname": dbname} if dbname else {}
        return psycopg.connect(self.admin_dsn, autocommit=True, **params)  # type: ignore[arg-type]

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

    def open(self, role: str | None = None) -> PostgresSessionStore:
        """A `PostgresSessionStore` on this database as `role` (default: `user`)."""
        from dsh_host.store.postgres import PostgresSessionStore

        return PostgresSessionStore.open(self.dsn(role))

    def admin(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A superuser connection to this database (it bypasses row-level security)."""
        return self.server.admin(self.name)
