"""The `web` plugin: `dsh web`, every session dsh can read as read-only pages in a browser.

Mounting the plugin adds the command and the `session_html` service (the static HTML page of a
session, which `dsh sessions export --html` writes); what they need of the extra
`dsh-host[web]` (Starlette, uvicorn, Jinja2, markdown-it-py) is imported when they run, so the
plugin mounts wherever dsh_host is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from dsh_host.host import Host


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    """Add `dsh web`."""
    from dsh_host.web.cli import web

    cli.add_command(web)


@hookimpl
def dsh_mount(host: Host) -> None:
    """Offer the static page of a session as the `session_html` service."""
    from dsh_host.web.service import SessionHtml

    host.services.register_factory("session_html", lambda: SessionHtml(host.services.session_query))
