"""The built-in plugin `store-postgres`: the PostgreSQL store and its commands.

The host mounts it when `[host] store = "postgres"` (and only then). It registers the store
`postgres` (configured by `[stores.postgres]`: `dsn`, `pool_size`, `statement_timeout_ms`) and
the commands `dsh store init`, `dsh sessions share` and `dsh sessions unshare`. psycopg comes
with the extra `dsh-host[postgres]`, and is imported only when the store is opened or a command
runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import click

from dsh_host.errors import ConfigError, DshError
from dsh_host.hookspecs import StoreFactory, hookimpl
from dsh_host.store.base import SessionNotFound, SessionStore
from dsh_host.terminal_text import display_inline_text

if TYPE_CHECKING:
    from dsh_host.host import Host
    from dsh_host.store.postgres.store import PostgresSessionStore

STORE = "postgres"


def postgres_module() -> ModuleType:
    """The store's package, or a ConfigError saying how to install it."""
    try:
        from dsh_host.store import postgres
    except ImportError as exc:
        raise ConfigError(
            f"[host] store = \"postgres\" needs psycopg: pip install 'dsh-host[postgres]' ({exc})"
        ) from None
    return postgres


def open_postgres_store(host: Host, table: Mapping[str, Any]) -> SessionStore:
    """`[stores.postgres]`: `dsn` (libpq; no password), `pool_size`, `statement_timeout_ms`."""
    store: SessionStore = postgres_module().PostgresSessionStore.from_table(table)
    return store


@hookimpl
def dsh_register_stores(register: Callable[[str, StoreFactory], None]) -> None:
    register(STORE, open_postgres_store)


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    cli.add_command(store_group)
    sessions = cli.commands["sessions"]
    assert isinstance(sessions, click.Group)  # the host's own `dsh sessions`
    sessions.add_command(share)
    sessions.add_command(unshare)


@click.group("store")
def store_group() -> None:
    """Manage the session store's database."""


@store_group.command("init")
@click.option("--dsn", help="Connect with this DSN instead of [stores.postgres] dsn (a role owning the database).")
@click.pass_obj
def init(host: Host, dsn: str | None) -> None:
    """Create or upgrade the dsh schema (idempotent, one transaction; run as the database's owner)."""
    postgres = postgres_module()
    table = host.config.store_table(STORE)
    if dsn is not None:
        table = {**table, "dsn": dsn}
    conninfo, _, _ = postgres.connection_settings(table)
    before, after = postgres.init_schema(conninfo)
    if before is None:
        click.echo(f"dsh store init: created the dsh schema, version {after}")
    elif before == after:
        click.echo(f"dsh store init: the dsh schema is up to date (version {after})")
    else:
        click.echo(f"dsh store init: upgraded the dsh schema from version {before} to {after}")


@click.command("share")
@click.argument("session_id")
@click.argument("role")
@click.pass_obj
def share(host: Host, session_id: str, role: str) -> None:
    """Let members of ROLE read SESSION_ID (list, show, export, reference); it stays yours to change."""
    _share(host, session_id, role)
    click.echo(f"shared {display_inline_text(session_id)} with {display_inline_text(role)} (read-only)")


@click.command("unshare")
@click.argument("session_id")
@click.pass_obj
def unshare(host: Host, session_id: str) -> None:
    """Make SESSION_ID private again: only you can see it."""
    _share(host, session_id, None)
    click.echo(f"{display_inline_text(session_id)} is private")


def _share(host: Host, session_id: str, role: str | None) -> None:
    try:
        cast("PostgresSessionStore", host.store).share(session_id, role)  # the store this plugin mounts for
    except SessionNotFound as exc:
        raise DshError(str(exc)) from None
