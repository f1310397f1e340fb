"""`dsh chat` (and bare `dsh`): the terminal UI."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from dsh_host.errors import ConfigError

if TYPE_CHECKING:
    from dsh_host.host import Host


def open_chat(host: Host, *, session_id: str | None, continue_last: bool) -> None:
    """Run the terminal UI; a `ConfigError` (exit 2) when stdin or stdout is not a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError('the chat needs a terminal; `dsh run "PROMPT"` runs a turn without one')
    from dsh_host.tui.app import run_chat

    run_chat(host, session_id=session_id, continue_last=continue_last)


@click.command()
@click.option("--session", "session_id", default=None, help="Open this session.")
@click.option("--continue", "continue_last", is_flag=True, help="Open the newest session in this directory.")
@click.pass_obj
def chat(host: Host, session_id: str | None, continue_last: bool) -> None:
    """Chat in the terminal UI (a new session in the current directory by default)."""
    if session_id is not None and continue_last:
        raise click.UsageError("--session and --continue are mutually exclusive")
    open_chat(host, session_id=session_id, continue_last=continue_last)
