"""The `session-reference` plugin: the service, `dsh ref`, and its terminal UI parts.

Besides the service and the commands it registers how reference contexts look in the
transcript (the `Referenced sessions · ...` card) and the `@` session completion source; their
module (`terminal`) loads rich, so it is imported only by the hooks that need it. Every `dsh`
command mounts the plugin, so the same goes for the commands, composing and the snapshot's
making: mounting loads the service's shell and the mention syntax, nothing more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsh_host import hookimpl
from dsh_host.settings import read_int, reject_unknown
from dsh_session_reference.limits import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    MAX_SAFE_INTEGER,
)

if TYPE_CHECKING:
    import asyncio

    import click

    from dsh_host import Agent, Composition, Host, ModelRequest
    from dsh_host.hookspecs import RegisterCompletion
    from dsh_host.ui import ContextRenderer
    from dsh_session_reference.service import SessionReferenceService

TABLE = "plugins.session-reference"
SERVICE = "session_references"


@hookimpl
def dsh_mount(host: Host, config: Mapping[str, Any]) -> None:
    """Validate `[plugins.session-reference]` and register `host.services.session_references`.

    The service is built when first asked for; the query service it reads through must be
    registered now (a host without one cannot mount the plugin).
    """
    reject_unknown(TABLE, config, ("max_references", "candidate_limit", "max_reference_bytes"))
    services = host.services
    if "session_query" not in services:
        # As asking for it would say; asking now would build it, which mounting must not do.
        raise AttributeError("service 'session_query' is not mounted")
    limits = {
        "max_references": read_int(TABLE, config, "max_references", MAX_REFERENCES, minimum=1, maximum=MAX_REFERENCES),
        "candidate_limit": read_int(TABLE, config, "candidate_limit", DEFAULT_CANDIDATE_LIMIT, minimum=1),
        "max_reference_bytes": read_int(
            TABLE, config, "max_reference_bytes", DEFAULT_MAX_REFERENCE_BYTES, minimum=1, maximum=MAX_SAFE_INTEGER
        ),
    }

    def build() -> SessionReferenceService:
        from dsh_session_reference.service import SessionReferenceService

        return SessionReferenceService(services.session_query, **limits)

    host.services.register_factory(SERVICE, build)


@hookimpl
def dsh_compose_message(agent: Agent, text: str, signal: asyncio.Event) -> Awaitable[Composition] | None:
    """Mentions in `text` become one snapshot context; text without mentions is left to others."""
    from dsh_session_reference.compose import compose

    service = agent.host.services.get(SERVICE)
    if service is None:  # mounted on another host than this agent's
        return None
    return compose(service, agent, text, signal)


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    """Add `dsh ref`."""
    from dsh_session_reference.cli import ref

    cli.add_command(ref)


@hookimpl
def dsh_register_context_renderers(register: Callable[[str, ContextRenderer], None]) -> None:
    """Show a reference context as its `Referenced sessions · ...` card."""
    # Imported here: the terminal parts load rich, which only a transcript needs.
    from dsh_session_reference.frame import META_KIND
    from dsh_session_reference.terminal import render_reference

    register(META_KIND, render_reference)


@hookimpl
def dsh_register_completions(host: Host, register: RegisterCompletion) -> None:
    """Offer the other sessions of `host` for an unquoted `@` token."""
    from dsh_session_reference.terminal import HINT, SessionCompletions

    service = host.services.get(SERVICE)
    if service is not None:
        register(SessionCompletions(service), HINT)


@hookimpl
def dsh_scripted_reply(request: ModelRequest) -> str | None:
    """The keyless model acknowledges a referenced-session snapshot it was given."""
    from dsh_session_reference.scripted_reply import scripted_reply

    return scripted_reply(request)
