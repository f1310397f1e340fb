"""The `session-reference` plugin: the service, `dsh ref`, and its terminal UI parts.

Besides the service and the commands it registers how reference contexts look in the
transcript (the `Referenced sessions · ...` card) and the `@` session completion source.
"""

from __future__ import annotations

from dsh_host import hookimpl, read_int, reject_unknown
from dsh_session_reference.compose import compose
from dsh_session_reference.frame import META_KIND
from dsh_session_reference.scripted_reply import scripted_reply
from dsh_session_reference.service import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    SessionReferenceService,
)
from dsh_session_reference.terminal import HINT, SessionCompletions, render_reference

TABLE = "plugins.session-reference"
SERVICE = "session_references"


@hookimpl
def dsh_mount(host, config):
    """Validate `[plugins.session-reference]` and register `host.services.session_references`."""
    reject_unknown(TABLE, config, ("max_references", "candidate_limit", "max_reference_bytes"))
    service = SessionReferenceService(
        host.services.session_query,
        max_references=read_int(TABLE, config, "max_references", MAX_REFERENCES, minimum=1, maximum=MAX_REFERENCES),
        candidate_limit=read_int(TABLE, config, "candidate_limit", DEFAULT_CANDIDATE_LIMIT, minimum=1),
        max_reference_bytes=read_int(
            TABLE, config, "max_reference_bytes", DEFAULT_MAX_REFERENCE_BYTES, minimum=1, maximum=2**53 - 1
        ),
    )
    host.services.register(SERVICE, service)


@hookimpl
def dsh_compose_message(agent, text, signal):
    """Mentions in `text` become one snapshot context; text without mentions is left to others."""
    service = agent.host.services.get(SERVICE)
    if service is None:  # mounted on another host than this agent's
        return None
    return compose(service, agent, text, signal)


@hookimpl
def dsh_register_commands(cli):
    from dsh_session_reference.cli import ref

    cli.add_command(ref)


@hookimpl
def dsh_register_context_renderers(register):
    """Show a reference context as its `Referenced sessions · ...` card."""
    register(META_KIND, render_reference)


@hookimpl
def dsh_register_completions(host, register):
    """Offer the other sessions of `host` for an unquoted `@` token."""
    service = host.services.get(SERVICE)
    if service is not None:
        register(SessionCompletions(service), HINT)


@hookimpl
def dsh_scripted_reply(request):
    """The keyless model acknowledges a referenced-session snapshot it was given."""
    return scripted_reply(request)
