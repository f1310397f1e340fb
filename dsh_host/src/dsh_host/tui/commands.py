"""The host's own slash commands, registered from `dsh_host.builtins` like any plugin's.

Each handler gets the `ChatUI` and the argument text, exactly as a plugin's handler does.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsh_host.text import iso_utc
from dsh_host.tui import render

if TYPE_CHECKING:
    from dsh_host.tui.app import ChatUI

FILE_HINT = "@path mentions a file"
NEWLINE_HINT = "Alt+Enter inserts a newline"


def show_help(ui: ChatUI, _: str) -> None:
    """`/help`: every command, then the mention syntaxes the editor completes."""
    lines = [f"/{c.name}  {c.help}" for c in ui.commands]
    lines.append(" · ".join([FILE_HINT, *ui.mention_hints, NEWLINE_HINT]))
    ui.notice("\n".join(lines))


async def new_session(ui: ChatUI, _: str) -> None:
    """`/new`: a new session in the current directory."""
    await ui.switch_to(ui.host.sessions.create(os.getcwd()), replay=False)


async def list_sessions(ui: ChatUI, _: str) -> None:
    """`/sessions`: every stored session, the current one marked."""
    records = await ui.host.services.session_query.list_sessions()
    rows = [(r.id, iso_utc(r.created_at), r.cwd, r.title) for r in records]
    ui.print(render.session_listing(rows, ui.session.id))


async def resume_session(ui: ChatUI, argument: str) -> None:
    """`/resume ID`: switch to a stored session and print it."""
    if not argument:
        ui.error("Usage: /resume ID (see /sessions)")
        return
    if argument == ui.session.id:
        ui.notice(f"Already in session {argument}.")
        return
    await ui.switch_to(await ui.host.sessions.resume(argument), replay=True)


def quit_chat(ui: ChatUI, _: str) -> None:
    """`/quit`: leave the chat."""
    ui.exit()


BUILTIN_COMMANDS = (
    ("help", "List the commands", show_help),
    ("new", "Start a new session", new_session),
    ("sessions", "List stored sessions", list_sessions),
    ("resume", "Switch to a stored session: /resume ID", resume_session),
    ("quit", "Leave the chat", quit_chat),
)
"""The host's slash commands as (name, help, handler), in the order `/help` lists them."""
