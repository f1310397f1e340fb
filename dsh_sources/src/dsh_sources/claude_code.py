"""The `claude-code` plugin: Claude Code's transcripts as read-only dsh sessions.

Every `dsh` command imports the plugins it mounts, and this one is mounted wherever it is
installed: so it imports nothing of its source here. The format (`dsh_sources.formats.claude_code`,
where the files are and how they are read) and the index load when the source is first used;
its names (`ClaudeCodeFormat`, ...) are served from this module too, loaded on first access.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_host import hookimpl
from dsh_sources.plugin import format_names, indexing_notice

if TYPE_CHECKING:
    from dsh_host.hookspecs import SourceFactory

NAME = "claude-code"
DISPLAY_NAME = "Claude Code"
"""The agent's name as people know it: views show it beside its sessions (`Claude Code · <title>`)."""
HOME = ("CLAUDE_CONFIG_DIR", ".claude")
"""Where Claude Code keeps its data: this variable, else this folder in the home directory."""


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Serve Claude Code's transcripts as the read-only source `claude-code`."""
    from dsh_sources.formats.claude_code import PROJECTION, ClaudeCodeFormat
    from dsh_sources.source import register_source

    register_source(
        register,
        NAME,
        ClaudeCodeFormat,
        home=HOME,
        projection=PROJECTION,
        display_name=DISPLAY_NAME,
    )


dsh_register_completions = indexing_notice(NAME)
__getattr__ = format_names("dsh_sources.formats.claude_code")
