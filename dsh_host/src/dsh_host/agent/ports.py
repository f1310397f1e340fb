"""The narrow interfaces the agent's parts take from each other and from the host.

An agent needs only the host's hook relay, its live sessions and its models; a turn needs only
what it reads of its agent. Naming those as protocols keeps the modules from importing each
other (the host builds agents, the agent builds turns), so data flows one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.agent.inbox import Content
    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.live_sessions import SessionRegistry
    from dsh_host.models.base import ModelAdapter
    from dsh_host.models.registry import ModelRegistry
    from dsh_host.plugins import HostPluginManager
    from dsh_host.session.session import Session
    from dsh_host.tools.base import Tool


class AgentHost(Protocol):
    """What an agent uses of its host (a `dsh_host.Host` is one)."""

    @property
    def hook(self) -> HookRelay:
        """The pluggy hook relay."""

    @property
    def pm(self) -> HostPluginManager:
        """The plugin manager (to learn when plugins come and go)."""

    @property
    def sessions(self) -> SessionRegistry:
        """The live sessions, persisted through the store."""

    @property
    def models(self) -> ModelRegistry:
        """Model adapters by provider."""


class TurnOwner(Protocol):
    """What a turn uses of the agent that runs it (a `dsh_host.Agent` is one)."""

    @property
    def host(self) -> AgentHost: ...

    session: Session
    provider: str
    model: str
    adapter: ModelAdapter
    cwd: Path
    max_parallel_tools: int
    tools: Mapping[str, Tool]

    @property
    def id(self) -> str: ...

    @property
    def disposed(self) -> bool: ...

    def request_header(self) -> dict[str, JsonValue]: ...

    def inject(self, content: Content, *, source: Json | None = None, meta: JsonValue = ...) -> None: ...

    def notify(self, hook: str, **arguments: object) -> None: ...
