"""The commands of the PostgreSQL store: `dsh store init`, `dsh sessions share|unshare`.

Added by the `store-postgres` plugin (`dsh_host.store.postgres_plugin`), so they exist exactly
when `[host] store = "postgres"`.
"""

from __future__ import annotations

from typing import Any

import click

from dsh_host.errors import DshError
from dsh_host.store.base import SessionNotFound
from dsh_host.store.postgres_loader import STORE, postgres_module
from dsh_host.terminal_text import display_inline_text


@click.group("store")
def store_group() -> None:
    """Manage the session store's database."""


@store_group.command("init")
@click.option("--dsn", help="Connect with this DSN instead of [stores.postgres] dsn (a role owning the database).")
@click.pass_obj
def init(host: Any, dsn: str | None) -> None:
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
def share(host: Any, session_id: str, role: str) -> None:
    """Let members of ROLE read SESSION_ID (list, show, export, reference); it stays yours to change."""
    _share(host, session_id, role)
    click.echo(f"shared {display_inline_text(session_id)} with {display_inline_text(role)} (read-only)")


@click.command("unshare")
@click.argument("session_id")
@click.pass_obj
def unshare(host: Any, session_id: str) -> None:
    """Make SESSION_ID private again: only you can see it."""
    _share(host, session_id, None)
    click.echo(f"{display_inline_text(session_id)} is private")


def _share(host: Any, session_id: str, role: str | None) -> None:
    try:
        host.store.share(session_id, role)
    except SessionNotFound as exc:
        raise DshError(str(exc)) from None
