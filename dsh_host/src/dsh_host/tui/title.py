"""The terminal window's title while a chat runs: it names the chat's session.

The title reaches the terminal inside an OSC 2 sequence, so the session's title (untrusted: it
comes from a log or a model) is made inert first: a BEL, ESC or C1 control in it would end the
sequence early and let the rest act on the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_host.terminal_text import display_inline_text
from dsh_host.titles import latest_title

if TYPE_CHECKING:
    from dsh_host.session.events import Event

# xterm's title stack (XTWINOPS 22/23): save the title the terminal had, restore it on the way out.
SAVE_TITLE = "\x1b[22;0t"
RESTORE_TITLE = "\x1b[23;0t"


def window_title(session_id: str, events: Sequence[Event]) -> str:
    """`dsh · <the session's latest title>`, or `dsh · <id>` while it has none; terminal-safe."""
    latest = latest_title(events)
    title = latest.get("title") if latest is not None else None
    return "dsh · " + display_inline_text(title if isinstance(title, str) and title else session_id)
