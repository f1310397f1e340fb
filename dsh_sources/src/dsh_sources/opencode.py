"""The `opencode` plugin: OpenCode's sessions as read-only dsh sessions.

Every `dsh` command imports the plugins it mounts, and this one is mounted wherever it is
installed: so it imports nothing of its source here. The format (`dsh_sources.formats.opencode`,
where the database is and how it is read) and the index load when the source is first used;
its names (`OpenCodeFormat`, ...) are served from this module too, loaded on first access.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_host import hookimpl
from dsh_sources.plugin import format_names, indexing_notice

if TYPE_CHECKING:
    from dsh_host.hookspecs import SourceFactory

NAME = "opencode"
DISPLAY_NAME = "OpenCode"
"""The agent's name as people know it: views show it beside its sessions (`OpenCode · <title>`)."""


def home() -> Path:
    """Where OpenCode keeps its data: `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode`."""
    data = os.environ.get("XDG_DATA_HOME")
    return (Path(data).expanduser() if data else Path.home() / ".local" / "share") / "opencode"


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Serve OpenCode's sessions as the read-only source `opencode`."""
    from dsh_sources.formats.opencode import PROJECTION, OpenCodeFormat
    from dsh_sources.source import register_store_source

    register_store_source(register, NAME, OpenCodeFormat, home=home, projection=PROJECTION, display_name=DISPLAY_NAME)


dsh_register_completions = indexing_notice(NAME)
__getattr__ = format_names("dsh_sources.formats.opencode")
