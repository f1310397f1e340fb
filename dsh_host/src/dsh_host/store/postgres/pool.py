"""Reaching the database: settings, connections, the role check, and the pool of transactions."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
import psycopg_pool
from psycopg import conninfo, errors
from psycopg.pq import TransactionStatus

from dsh_host.errors import ConfigError
from dsh_host.settings import read_int, read_str, reject_unknown
from dsh_host.store.base import StoreError

DEFAULT_POOL_SIZE = 4
DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10


class StoreUnavailable(StoreError):
    """The database cannot serve as a store (unreachable, wrong role, missing or newer schema)."""

    exit_code = 2


def one_line(exc: BaseException) -> str:
    """A database error as one line (libpq messages span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def connection_settings(table: Mapping[str, Any]) -> tuple[str, int, int]:
    """(dsn, pool size, statement timeout in ms) from a `[stores.postgres]` table, validated."""
    name = "stores.postgres"
    reject_unknown(name, table, ("dsn", "pool_size", "statement_timeout_ms"))
    dsn = read_str(name, table, "dsn", "")
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"[{name}] dsn is not valid: {one_line(exc)}") from None
    if "password" in params:
        raise ConfigError(f"[{name}] dsn must not hold a password: set PGPASSWORD or use a pgpass file (~/.pgpass)")
    pool_size = read_int(name, table, "pool_size", DEFAULT_POOL_SIZE, minimum=1)
    timeout = read_int(name, table, "statement_timeout_ms", DEFAULT_STATEMENT_TIMEOUT_MS, minimum=0)
    return dsn, pool_size, timeout


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection:
    """One connection; a failure is a StoreUnavailable naming the cause in one line."""
    try:
        return psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, **kwargs)
    except psycopg.ProgrammingError as exc:
        raise StoreUnavailable(f"PostgreSQL store: invalid dsn: {one_line(exc)}") from None
    except psycopg.Error as exc:
        raise StoreUnavailable(f"PostgreSQL store: cannot connect: {one_line(exc)}") from None


def check_role(conn: psycopg.Connection) -> str:
    """The connecting role's name (the principal); refused when it bypasses row-level security."""
    role, superuser, bypass = conn.execute(  # type: ignore[misc]  # the role's own row: always one
        "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if superuser or bypass:
        what = "a superuser" if superuser else "a role with BYPASSRLS"
        raise StoreUnavailable(
            f"PostgreSQL store: refusing to run as {role!r}, {what}: row-level security would not apply; "
            "connect as an ordinary role"
        )
    return role


def session_options(statement_timeout_ms: int) -> str:
    """The libpq `options` every connection of a store runs with."""
    return f"-c statement_timeout={statement_timeout_ms}"


@contextlib.contextmanager
def in_transaction(conn: psycopg.Connection, begin: str = "BEGIN") -> Iterator[psycopg.Connection]:
    """One transaction on `conn`, in pipeline mode: committed when the block ends, rolled back when it raises.

    Statements are sent as they are issued and the connection waits only where a result is
    fetched, so a flush costs two round trips (lock the session's row; write everything and
    commit) and a read one. Database errors pass through as psycopg's.
    """
    try:
        with conn.pipeline():
            conn.execute(begin)
            yield conn
            conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        raise


def lost_connection(exc: psycopg.Error) -> bool:
    """Whether `exc` says the connection to the server is gone (not that a statement failed)."""
    # No SQLSTATE: libpq's own report of a broken socket; class 08 and 57P: the server went away.
    return isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
    )


def store_error(exc: psycopg.Error) -> StoreError:
    """A database error as the one-line StoreError a store raises."""
    if isinstance(exc, errors.UniqueViolation):
        return StoreError(f"PostgreSQL store: conflict with another writer: {one_line(exc)}")
    return StoreError(f"PostgreSQL store: {one_line(exc)}")


class Pool:
    """The store's connections: a pool whose every use is one transaction. Thread-safe."""

    def __init__(self, dsn: str, dbname: str, *, size: int, options: str) -> None:
        self.dbname = dbname
        self._closed = False
        self._dsn = dsn
        self._options = options
        self._spare_size = size
        self._spare: list[psycopg.Connection] = []  # dedicated connections that hold nothing
        self._spare_lock = threading.Lock()
        self._pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True, "options": options, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=CONNECT_TIMEOUT_S,
            open=False,
            name="dsh-store",
        )
        self._pool.open(wait=False)

    def close(self) -> None:
        with self._spare_lock:
            self._closed = True
        self._drop_spare()
        self._pool.close()

    def check_open(self) -> None:
        """StoreError when the store was closed."""
        if self._closed:
            raise StoreError(f"session store (PostgreSQL database {self.dbname!r}) is closed")

    def dedicated(self, *, fresh: bool = False) -> psycopg.Connection:
        """A connection of its own, outside the pool, set up as the pool's are (StoreUnavailable when none).

        One that `give_back` kept is handed out again unless `fresh` is set: connecting costs
        more than a whole flush, and a host drives one new session after another.
        """
        self.check_open()
        if not fresh:
            with self._spare_lock:
                while self._spare:
                    conn = self._spare.pop()
                    if not conn.closed:
                        return conn
        return connect(self._dsn, autocommit=True, options=self._options)

    def give_back(self, conn: psycopg.Connection) -> None:
        """Keep a dedicated connection that holds nothing any more for the next `dedicated()`, or close it."""
        if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
            with self._spare_lock:
                if not self._closed and len(self._spare) < self._spare_size:
                    self._spare.append(conn)
                    return
        conn.close()

    def _drop_spare(self) -> None:
        with self._spare_lock:
            spare, self._spare = self._spare, []
        for conn in spare:
            conn.close()

    def connection_lost(self) -> None:
        """A connection to the server broke: drop the pooled ones that broke with it.

        The pool would hand each out once more, to fail; checked now, the next transaction gets
        a working connection as soon as the server answers again. Kept dedicated connections
        broke with it too.
        """
        self._drop_spare()
        with contextlib.suppress(psycopg.Error, psycopg_pool.PoolTimeout):
            self._pool.check()

    @contextlib.contextmanager
    def transaction(self, begin: str = "BEGIN") -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection (see `in_transaction`); errors become one-line StoreErrors."""
        self.check_open()
        try:
            with self._pool.connection() as conn, in_transaction(conn, begin):
                yield conn
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(f"PostgreSQL store: no connection to {self.dbname!r}: {one_line(exc)}") from None
        except psycopg.Error as exc:
            if lost_connection(exc):
                self.connection_lost()
            raise store_error(exc) from None

    def read(self) -> contextlib.AbstractContextManager[psycopg.Connection]:
        """A read transaction: every statement inside sees one snapshot."""
        return self.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
