"""The `codex` plugin: Codex CLI's rollouts as read-only dsh sessions.

Every `dsh` command imports the plugins it mounts, and this one is mounted wherever it is
installed: so it imports nothing of its source here. The format (`dsh_sources.formats.codex`,
where the files are and how they are read) and the index load when the source is first used;
its names (`CodexFormat`, ...) are served from this module too, loaded on first access.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_host import hookimpl
from dsh_sources.plugin import format_names, indexing_notice

if TYPE_CHECKING:
    from dsh_host.hookspecs import SourceFactory

NAME = "codex"
DISPLAY_NAME = "Codex"
"""The agent's name as people know it: views show it beside its sessions (`Codex · <title>`)."""


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Serve Codex CLI's rollouts as the read-only source `codex`."""
    from dsh_sources.formats.codex import PROJECTION, CodexFormat
    from dsh_sources.source import register_source

    register_source(
        register, NAME, CodexFormat, home=("CODEX_HOME", ".codex"), projection=PROJECTION, display_name=DISPLAY_NAME
    )


dsh_register_completions = indexing_notice(NAME)
__getattr__ = format_names("dsh_sources.formats.codex")
