"""What every source plugin module of this distribution shares, kept light: `dsh` imports the plugins it mounts.

A plugin module (`claude_code`, `codex`, `gemini_cli`, `opencode`) registers its source through its
own `dsh_register_session_sources` and takes the other two from here: the `@` menu's line while
its index builds, and its format's names served from the plugin module, imported on first access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_host import hookimpl

if TYPE_CHECKING:
    from dsh_host import Host
    from dsh_host.hookspecs import RegisterCompletion


def indexing_notice(name: str) -> Callable[[Host, RegisterCompletion], None]:
    """The `dsh_register_completions` hook of the source `name`: a line in the `@` menu while its index builds."""

    @hookimpl
    def dsh_register_completions(host: Host, register: RegisterCompletion) -> None:
        """Say in the `@` menu while the source's index is still being built."""
        from dsh_sources.source import IndexingNotice

        register(IndexingNotice(host, name), None)

    return dsh_register_completions


def format_names(module: str) -> Callable[[str], object]:
    """A plugin module's `__getattr__`: the names of its format module (`module`), imported on first access."""

    def __getattr__(name: str) -> object:
        if name.startswith(("dsh_", "__")):  # hooks and dunders: pluggy and the import system ask every plugin
            raise AttributeError(f"module has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
