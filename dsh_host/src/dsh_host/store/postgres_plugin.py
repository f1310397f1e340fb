"""The built-in plugin `store-postgres`: the PostgreSQL store and its commands.

The host mounts it when `[host] store = "postgres"` (and only then), so psycopg is imported
only by hosts that use PostgreSQL; it comes with the extra `dsh-host[postgres]`. It registers
the store `postgres` (configured by `[stores.postgres]`: `dsn`, `pool_size`,
`statement_timeout_ms`) and the commands `dsh store init`, `dsh sessions share` and
`dsh sessions unshare` (in `dsh_host.cli.store_postgres`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsh_host.hookspecs import StoreFactory, hookimpl
from dsh_host.store.postgres_loader import STORE, postgres_module

if TYPE_CHECKING:
    import click

    from dsh_host.host import Host
    from dsh_host.store.base import SessionStore


def open_postgres_store(host: Host, table: Mapping[str, Any]) -> SessionStore:
    """`[stores.postgres]`: `dsn` (libpq; no password), `pool_size`, `statement_timeout_ms`."""
    return postgres_module().PostgresSessionStore.from_table(table)


@hookimpl
def dsh_register_stores(register: Callable[[str, StoreFactory], None]) -> None:
    register(STORE, open_postgres_store)


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    # Imported here: only a host building its command line needs the commands.
    from dsh_host.cli.store_postgres import share, store_group, unshare

    cli.add_command(store_group)
    sessions = cli.commands["sessions"]
    sessions.add_command(share)
    sessions.add_command(unshare)
