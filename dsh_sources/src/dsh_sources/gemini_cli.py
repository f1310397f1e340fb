"""The `gemini-cli` plugin: Gemini CLI's chat recordings as read-only dsh sessions.

Every `dsh` command imports the plugins it mounts, and this one is mounted wherever it is
installed: so it imports nothing of its source here. The format (`dsh_sources.formats.gemini_cli`,
where the files are and how they are read) and the index load when the source is first used;
its names (`GeminiCliFormat`, ...) are served from this module too, loaded on first access.
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

NAME = "gemini-cli"
DISPLAY_NAME = "Gemini CLI"
"""The agent's name as people know it: views show it beside its sessions (`Gemini CLI · <title>`)."""


def home() -> Path:
    """Where Gemini CLI keeps its data: `.gemini` in the home `$GEMINI_CLI_HOME` names, else in the user's home."""
    configured = os.environ.get("GEMINI_CLI_HOME")
    return (Path(configured).expanduser() if configured else Path.home()) / ".gemini"


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Serve Gemini CLI's chat recordings as the read-only source `gemini-cli`."""
    from dsh_sources.formats.gemini_cli import PROJECTION, GeminiCliFormat
    from dsh_sources.source import register_source

    register_source(
        register,
        NAME,
        GeminiCliFormat,
        home=home,
        projection=PROJECTION,
        display_name=DISPLAY_NAME,
    )


dsh_register_completions = indexing_notice(NAME)
__getattr__ = format_names("dsh_sources.formats.gemini_cli")
