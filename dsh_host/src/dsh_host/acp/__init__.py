"""The `acp` plugin: `dsh acp`, the automation-only Agent Client Protocol (v1) transport.

Mounting the plugin only adds the command; the protocol SDK (extra `dsh-host[acp]`) is imported
when the command runs, so the plugin mounts wherever dsh_host is installed. The command serves
one client on stdin/stdout through a host of its own, composed without session query and
without session-reference (`dsh_host.acp.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.hookspecs import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    """Add `dsh acp`."""
    from dsh_host.acp.cli import acp

    cli.add_command(acp)
