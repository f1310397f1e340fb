"""Model targets (`provider/model` pairs) and where compaction finds them.

Compaction works on behalf of an agent but needs only two things from it: the session, and the
agent's configured model as a last-resort summarization target. `CompactAgent` is that view; any
object with a `session` attribute (the host's `Agent`, say) can be turned into one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host import Session


@dataclass(frozen=True)
class ModelTarget:
    """A provider and a model, both non-empty."""

    provider: str
    model: str

    @property
    def key(self) -> str:
        """`provider/model`, the name messages and per-target warnings use."""
        return f"{self.provider}/{self.model}"

    @classmethod
    def of(cls, provider: object, model: object) -> ModelTarget | None:
        """The target of a pair, or None unless both are non-empty strings."""
        if isinstance(provider, str) and provider and isinstance(model, str) and model:
            return cls(provider, model)
        return None


def routed_target(session: Session) -> ModelTarget | None:
    """The target of the latest durable `request/header`, if one was logged."""
    header = session.request_header()
    if header is None:
        return None
    config = header.get("config")
    if not isinstance(config, Mapping):
        return None
    return ModelTarget.of(config.get("provider"), config.get("model"))


@dataclass(frozen=True)
class CompactAgent:
    """What compaction needs of an agent: its session and its configured model, if any."""

    session: Session
    fallback: ModelTarget | None = None

    @classmethod
    def of(cls, agent: object) -> CompactAgent:
        """View a `CompactAgent`, a bare `Session`, or an agent-like object as a `CompactAgent`.

        An agent's configured model is read from `provider`/`model` attributes, directly or on
        its `options`, so compaction does not depend on the agent class itself.
        """
        # Imported here: the plugin's configuration needs this module, and mounting must not
        # load the session machinery.
        from dsh_host import Session

        if isinstance(agent, CompactAgent):
            return agent
        if isinstance(agent, Session):
            return cls(agent)
        session = getattr(agent, "session", None)
        if not isinstance(session, Session):
            raise TypeError(f"compaction needs a session or an agent with one, got {type(agent).__name__}")
        return cls(session, _configured_target(agent))


def _configured_target(agent: object) -> ModelTarget | None:
    for holder in (agent, getattr(agent, "options", None)):
        if holder is None:
            continue
        if isinstance(holder, Mapping):
            target = ModelTarget.of(holder.get("provider"), holder.get("model"))
        else:
            target = ModelTarget.of(getattr(holder, "provider", None), getattr(holder, "model", None))
        if target is not None:
            return target
    return None
