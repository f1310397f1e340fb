"""The `mcp` plugin: `dsh mcp`, session search and session snapshots for any MCP client.

Mounting the plugin only adds the command; the protocol SDK (extra `dsh-host[mcp]`) is imported
when the command runs, so the plugin mounts wherever dsh_host is installed. The command serves
one client on stdin/stdout through the host the configuration composes: its store (with the
connecting role's visibility), session query, and the snapshots of the session-reference
service, without which it refuses to start (`dsh_host.mcp.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.hookspecs import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    """Add `dsh mcp`."""
    from dsh_host.mcp.cli import mcp

    cli.add_command(mcp)
