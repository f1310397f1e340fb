"""The mounted sources of a host: registered through `dsh_register_session_sources`, opened on first use.

A session id `<name>:<rest>` belongs to the source registered as `name`, when one is; any other
id goes to the store exactly as before. Sources open lazily (their factory runs on the first
read that needs them), once, whichever thread asks first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dsh_host.hookspecs import SourceFactory
from dsh_host.sources.base import SessionSource, SourceProblems, SourceReadOnly

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.host import Host

SEPARATOR = ":"
"""Between a source's name and the agent's own id in a source session's id."""


def source_factories(hook: HookRelay) -> dict[str, SourceFactory]:
    """Every source the mounted plugins offer, by name, in registration order."""
    factories: dict[str, SourceFactory] = {}

    def register(name: str, factory: SourceFactory) -> None:
        if not isinstance(name, str) or not name or SEPARATOR in name:
            raise ValueError(f"source name must be a non-empty string without {SEPARATOR!r}, got {name!r}")
        if name in factories:
            raise ValueError(f"source {name!r} is already registered")
        factories[name] = factory

    hook.dsh_register_session_sources(register=register)
    return factories


class SessionSources:
    """The sources of one host, by name; `owner(id)` says which one serves a session id."""

    def __init__(
        self, host: Host, factories: Mapping[str, SourceFactory], tables: Callable[[str], dict[str, Any]]
    ) -> None:
        self._host = host
        self._factories = dict(factories)
        self._tables = tables
        self._opened: dict[str, SessionSource] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def names(self) -> tuple[str, ...]:
        """The registered sources' names, in registration order."""
        return tuple(self._factories)

    def __bool__(self) -> bool:
        return bool(self._factories)

    def owner(self, session_id: str) -> str | None:
        """The name of the source serving `session_id`, or None (the store's)."""
        if not self._factories:
            return None
        name, separator, _ = session_id.partition(SEPARATOR)
        return name if separator and name in self._factories else None

    def get(self, name: str) -> SessionSource:
        """The source registered as `name`, opened on first use (a blocking call)."""
        source = self._opened.get(name)
        if source is not None:
            return source
        with self._lock:
            if self._closed:
                raise RuntimeError("the host's sources are closed")
            source = self._opened.get(name)
            if source is None:
                source = self._opened[name] = self._factories[name](self._host, self._tables(name))
        return source

    def display_name(self, name: str) -> str:
        """The name a person knows source `name`'s agent by: its `display_name`, else `name` (opens it)."""
        shown = getattr(self.get(name), "display_name", None)
        return shown if isinstance(shown, str) and shown.strip() else name

    def agent_name(self, session_id: str) -> str | None:
        """The display name of the agent keeping `session_id`, or None for a session of dsh's own."""
        name = self.owner(session_id)
        return None if name is None else self.display_name(name)

    def for_session(self, session_id: str) -> SessionSource | None:
        """The source serving `session_id` (opened), or None when the store does."""
        name = self.owner(session_id)
        return None if name is None else self.get(name)

    def every(self) -> list[tuple[str, SessionSource]]:
        """Every source, opened, by name in registration order."""
        return [(name, self.get(name)) for name in self._factories]

    def problems(self, names: Iterable[str] | None = None) -> list[tuple[str, str]]:
        """(source name, line) for every problem the sources (or those `names` names) say they have
        (`SourceProblems`); only the sources asked are opened."""
        wanted = None if names is None else set(names)
        asked = [name for name in self.names if wanted is None or name in wanted]
        return [
            (name, line)
            for name in asked
            for source in (self.get(name),)
            if isinstance(source, SourceProblems)
            for line in source.problems()
        ]

    def refuse_write(self, session_id: str) -> None:
        """Raise `SourceReadOnly` when a source serves `session_id` (before any write to it)."""
        name = self.owner(session_id)
        if name is not None:
            raise SourceReadOnly(session_id, name)

    def close(self) -> None:
        """Close every opened source (later `get` calls fail)."""
        with self._lock:
            self._closed = True
            opened, self._opened = list(self._opened.values()), {}
        for source in opened:
            source.close()
