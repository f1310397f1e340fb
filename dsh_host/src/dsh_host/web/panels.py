"""Plugins' panels on a session's pages: the `dsh_web_session_panels` hook, called and made inert."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from dsh_host.asyncs import resolve
from dsh_host.web.text import visible_text

if TYPE_CHECKING:
    from pluggy import HookImpl

    from dsh_host.host import Host

log = logging.getLogger("dsh.web")


async def session_panels(host: Host, session_id: str) -> list[tuple[str, str]]:
    """Every plugin's `(title, text)` panels for `session_id`, their text made visible; a plugin
    whose implementation fails is logged and left out."""
    shown: list[tuple[str, str]] = []
    for impl in host.hook.dsh_web_session_panels.get_hookimpls():
        try:
            result = await resolve(impl.function(**_arguments(impl, host, session_id)))
            for title, text in cast("Sequence[tuple[object, object]] | None", result) or ():
                shown.append((visible_text(str(title)), visible_text(str(text))))
        except Exception:
            log.exception("web: the panels of plugin %s failed", impl.plugin_name)
    return shown


def _arguments(impl: HookImpl, host: Host, session_id: str) -> dict[str, object]:
    """The hook's arguments an implementation asks for (it may take any subset, by name)."""
    offered = {"host": host, "session_id": session_id}
    return {name: offered[name] for name in impl.argnames}
